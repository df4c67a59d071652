// Qt Quick Test runner for the app's QML components (tests/ui/qml/tst_*.qml). The CosmosChat
// module's QML files, its qmldir and the icons are compiled into this binary under qrc:/, like in
// the app, so the tests import CosmosChat.
#include <QQmlEngine>
#include <QtQuickTest>

class Setup : public QObject {
  Q_OBJECT

 public slots:
  void qmlEngineAvailable(QQmlEngine* engine) { engine->addImportPath(QStringLiteral("qrc:/")); }
};

QUICK_TEST_MAIN_WITH_SETUP(qml_components, Setup)

#include "qml_test_main.moc"
