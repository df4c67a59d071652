// switchModel (ui/model_switch.h): a new model loads while the old one stays; only when the new one
// does not fit beside it is the old one released for a second attempt, and loaded back when the new
// one does not fit alone either. Fake loaders count their calls and fail as each row says.
#include <QtTest>

#include <memory>
#include <vector>

#include "model_switch.h"

using cosmos::ErrorCategory;

namespace {

struct Model {
  int id;
};

using Loaded = cosmos::Result<std::unique_ptr<Model>>;

// Results of successive loadNew calls: 0 = success, else the category of the failure.
enum Attempt { Ok = 0, Oom = 1, BadInput = 2, Cancelled = 3 };

Loaded attempt(Attempt a, int id) {
  switch (a) {
    case Ok: return std::make_unique<Model>(Model{id});
    case Oom:
      return cosmos::make_error(ErrorCategory::out_of_memory, "backend.gpu_memory", "out of GPU memory: needed 8000 MiB");
    case BadInput: return cosmos::make_error(ErrorCategory::bad_input, "load.model_dir", "no such folder");
    case Cancelled: return cosmos::make_error(ErrorCategory::cancelled, "load.cancelled", "loading was cancelled");
  }
  return cosmos::make_error(ErrorCategory::internal, "test", "unreachable");
}

}  // namespace

class TestModelSwitch : public QObject {
  Q_OBJECT

 private slots:
  void switches_data() {
    QTest::addColumn<bool>("hasOld");
    QTest::addColumn<QList<int>>("newAttempts");  // what each loadNew call does, in order
    QTest::addColumn<bool>("oldReloads");         // whether loading the old model again works
    QTest::addColumn<bool>("ok");
    QTest::addColumn<int>("newCalls");
    QTest::addColumn<int>("oldCalls");
    QTest::addColumn<int>("currentAfter");  // id of the model in `current` afterwards: 1 old, 3 reloaded old, 0 none
    QTest::addColumn<QString>("messageContains");

    QTest::newRow("fits beside the old one") << true << QList<int>{Ok} << true << true << 1 << 0 << 1 << "";
    QTest::newRow("fits only alone") << true << QList<int>{Oom, Ok} << true << true << 2 << 0 << 0 << "";
    QTest::newRow("does not fit: old loaded again")
        << true << QList<int>{Oom, Oom} << true << false << 2 << 1 << 3 << "the previous model was loaded again";
    QTest::newRow("does not fit, old cannot load again")
        << true << QList<int>{Oom, Oom} << false << false << 2 << 1 << 0 << "could not be loaded again";
    QTest::newRow("another error: no retry") << true << QList<int>{BadInput} << true << false << 1 << 0 << 1
                                             << "no such folder";
    QTest::newRow("cancelled: no retry") << true << QList<int>{Cancelled} << true << false << 1 << 0 << 1
                                         << "cancelled";
    QTest::newRow("no old model: no retry") << false << QList<int>{Oom} << true << false << 1 << 0 << 0
                                            << "out of GPU memory";
  }

  void switches() {
    QFETCH(bool, hasOld);
    QFETCH(QList<int>, newAttempts);
    QFETCH(bool, oldReloads);
    QFETCH(bool, ok);
    QFETCH(int, newCalls);
    QFETCH(int, oldCalls);
    QFETCH(int, currentAfter);
    QFETCH(QString, messageContains);

    std::unique_ptr<Model> current = hasOld ? std::make_unique<Model>(Model{1}) : nullptr;
    int calledNew = 0, calledOld = 0;
    bool oldPresentAtFirstAttempt = false;
    const std::function<Loaded()> loadNew = [&]() -> Loaded {
      if (calledNew == 0) oldPresentAtFirstAttempt = current != nullptr;
      // The second attempt must run with the old model released.
      if (calledNew == 1) {
        if (current) QTest::qFail("the old model is still loaded for the second attempt", __FILE__, __LINE__);
      }
      const Attempt a = static_cast<Attempt>(newAttempts.value(calledNew, Oom));
      ++calledNew;
      return attempt(a, 2);
    };
    const std::function<Loaded()> loadOld = [&]() -> Loaded {
      ++calledOld;
      if (!oldReloads) return cosmos::make_error(ErrorCategory::io, "file.read", "disk went away");
      return std::make_unique<Model>(Model{3});
    };
    cosmos::ui::SwitchOutcome outcome;
    auto r = cosmos::ui::switchModel<Model>(current, loadNew, loadOld, &outcome);
    QCOMPARE(r.ok(), ok);
    QCOMPARE(calledNew, newCalls);
    QCOMPARE(calledOld, oldCalls);
    QCOMPARE(oldPresentAtFirstAttempt, hasOld);
    QCOMPARE(current ? current->id : 0, currentAfter);
    QCOMPARE(outcome.retriedAlone, newCalls == 2);
    QCOMPARE(outcome.restored, currentAfter == 3);
    if (ok) {
      QCOMPARE((*r)->id, 2);
    } else {
      QVERIFY2(QString::fromStdString(r.error().message).contains(messageContains),
               qPrintable(QString::fromStdString(r.error().message)));
    }
  }
};

QTEST_APPLESS_MAIN(TestModelSwitch)
#include "test_model_switch.moc"
