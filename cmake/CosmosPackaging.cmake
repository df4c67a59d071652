# Installing like a desktop app, and the Debian package (CPack).
#
#   cmake --workflow --preset package           # release build + build/release/cosmos-chat_<v>_<arch>.deb
#   cd build/<preset> && cpack -G DEB           # the same from any build tree (CI: build/ci)
#
# Installed layout (prefix /usr in the package):
#   bin/cosmos-chat, bin/cosmos-cli                  RUNPATH $ORIGIN/../lib/cosmos-chat
#   lib/cosmos-chat/libcosmos-engine.so              private library (no RUNPATH)
#   lib/cosmos-chat/libcosmos-cuda.so                CUDA backend module, dlopened (RUNPATH $ORIGIN and the toolkit)
#   share/applications/<id>.desktop, share/metainfo/<id>.metainfo.xml
#   share/icons/hicolor/scalable/apps/<id>.svg and hicolor/NxN/apps/<id>.png
# <id> is the app's reverse-DNS id, used for the desktop entry, AppStream, and the icon name.
set(COSMOS_APP_ID io.github.cosmoschat.CosmosChat)

if(COSMOS_WITH_UI)
  set(_pkg ${PROJECT_SOURCE_DIR}/packaging)
  set(_svg ${PROJECT_SOURCE_DIR}/resources/cosmos-chat.svg)
  install(FILES ${_pkg}/${COSMOS_APP_ID}.desktop DESTINATION share/applications)
  install(FILES ${_pkg}/${COSMOS_APP_ID}.metainfo.xml DESTINATION share/metainfo)
  install(FILES ${_svg} DESTINATION share/icons/hicolor/scalable/apps RENAME ${COSMOS_APP_ID}.svg)

  # PNG icons rendered from the SVG at build time (rsvg-convert, Debian package librsvg2-bin).
  find_program(COSMOS_RSVG_CONVERT rsvg-convert)
  if(COSMOS_RSVG_CONVERT)
    set(_pngs)
    foreach(size 16 24 32 48 64 128 256)
      set(_dir ${CMAKE_BINARY_DIR}/icons/hicolor/${size}x${size}/apps)
      set(_png ${_dir}/${COSMOS_APP_ID}.png)
      add_custom_command(OUTPUT ${_png}
        COMMAND ${CMAKE_COMMAND} -E make_directory ${_dir}
        COMMAND ${COSMOS_RSVG_CONVERT} -w ${size} -h ${size} -o ${_png} ${_svg}
        DEPENDS ${_svg} VERBATIM)
      list(APPEND _pngs ${_png})
      install(FILES ${_png} DESTINATION share/icons/hicolor/${size}x${size}/apps)
    endforeach()
    add_custom_target(cosmos_icons ALL DEPENDS ${_pngs})
  else()
    message(WARNING "rsvg-convert not found (packaging/setup.sh installs librsvg2-bin): the PNG app icons "
                    "are not made, only the scalable one is installed")
  endif()

  # The desktop entry and the AppStream metadata pass their validators, and the metadata's newest
  # release is this version.
  if(COSMOS_BUILD_TESTS)
    add_test(NAME packaging_metadata
      COMMAND bash ${_pkg}/check-metadata.sh ${_pkg}/${COSMOS_APP_ID}.desktop
              ${_pkg}/${COSMOS_APP_ID}.metainfo.xml ${PROJECT_VERSION})
    set_tests_properties(packaging_metadata PROPERTIES LABELS packaging TIMEOUT 60)
  endif()
endif()

# --- the Debian package ---
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cosmos-chat)
set(CPACK_PACKAGE_VENDOR "The Cosmos Chat developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Chat with NVIDIA Cosmos-Reason1-7B locally on your GPU")
set(CPACK_PACKAGE_DESCRIPTION
  "Cosmos Chat is a desktop chat app (Qt 6) for the NVIDIA Cosmos-Reason1-7B reasoning model. It runs
the model with its own CUDA engine on an NVIDIA GPU, or on the CPU when there is no usable GPU.
Replies stream in, the model's reasoning folds away, conversations are kept locally, searchable and
exportable, and a live panel shows GPU memory and speed. cosmos-cli drives the same engine from
scripts. The model (about 17 GB) is downloaded separately.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # the ci preset is RelWithDebInfo: no debug info in the package
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # cosmos-chat_0.1.0_amd64.deb
set(COSMOS_PACKAGE_MAINTAINER "The Cosmos Chat developers"
    CACHE STRING "The Debian package's Maintainer field (Name <email>)")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${COSMOS_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# Depends: computed by dpkg-shlibdeps from every ELF file in the package. libcosmos-engine.so is
# private (usr/lib/cosmos-chat): the executables find it at run time through their $ORIGIN RUNPATH,
# which dpkg-shlibdeps cannot resolve on the relative paths CPack gives it, so -l points it there
# (relative to the staging folder, where CPack runs dpkg-shlibdeps). It ships in this package, so it
# adds no dependency.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS usr/${COSMOS_INSTALL_PRIVATE_LIBDIR})
# What no ELF file names: the QML modules, the SQLite driver and the SVG plugin the app loads at run
# time (the run-time part of packaging/setup.sh's Qt list).
if(COSMOS_WITH_UI)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "qml6-module-qtquick, qml6-module-qtquick-controls, qml6-module-qtquick-layouts, \
qml6-module-qtquick-window, qml6-module-qtquick-templates, qml6-module-qtquick-dialogs, \
qml6-module-qtqml, qml6-module-qtqml-models, qml6-module-qtqml-workerscript, \
qml6-module-qt-labs-folderlistmodel, libqt6sql6-sqlite, libqt6svg6")
endif()
# The CUDA backend module (libcosmos-cuda.so) links libcublasLt from the CUDA toolkit, which is not
# a Debian package here (/usr/local/cuda, or NVIDIA's own repository), and it needs the NVIDIA
# driver (libcuda, dlopened by the statically linked CUDA runtime). These must NOT be Depends: the
# package installs and runs on CPU-only machines, where the engine fails to load the module, says
# why, and uses the CPU. dpkg-shlibdeps runs over the module too (CPack gives it every ELF file),
# but CPack passes --ignore-missing-info, so a library without Debian dependency information
# (cuBLASLt from the toolkit) adds nothing; packaging/test-package.sh checks that Depends names no
# CUDA or NVIDIA package. They are Recommends instead, as named in NVIDIA's Debian 12 repository:
# the driver (>= the version this toolkit needs) and this toolkit's cuBLAS runtime.
if(COSMOS_WITH_CUDA)
  if(CUDAToolkit_VERSION_MAJOR GREATER_EQUAL 13)
    set(_driver 580)
  else()
    set(_driver 525)
  endif()
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
    "cuda-drivers (>= ${_driver}) | nvidia-open (>= ${_driver}) | nvidia-driver (>= ${_driver}), \
libcublas-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
endif()

include(CPack)
