// Qt Quick Test runner for the app's QML components (tests/ui/qml/tst_*.qml). The CosmosChat
// module (its compiled QML, qmldir and icons under qrc:/) is linked in as a static plugin, like in
// the app, so the tests import CosmosChat.
#include <QQmlEngine>
#include <QQmlExtensionPlugin>
#include <QtQuickTest>

Q_IMPORT_QML_PLUGIN(CosmosChatPlugin)

class Setup : public QObject {
  Q_OBJECT

 public slots:
  void qmlEngineAvailable(QQmlEngine* engine) { engine->addImportPath(QStringLiteral("qrc:/")); }
};

QUICK_TEST_MAIN_WITH_SETUP(qml_components, Setup)

#include "qml_test_main.moc"
