// An EngineHost over the scripted FakeChatEngine with its fake model loaded (Ready), for the
// EngineHost tests.
#pragma once

#include <QSignalSpy>
#include <QtGlobal>

#include <memory>

#include "engine_host.h"
#include "fake_chat_engine.h"

namespace cosmos::ui::testing {

inline std::unique_ptr<EngineHost> loadedFakeHost(const std::shared_ptr<FakeScript>& script) {
  auto host = std::make_unique<EngineHost>(makeFakeEngine(script));
  QSignalSpy states(host.get(), &EngineHost::stateChanged);
  host->loadModel(QStringLiteral("/models/first"));
  while (host->state() != EngineHost::Ready && states.wait(5000)) {
  }
  if (host->state() != EngineHost::Ready) qWarning("the fake model did not load");
  return host;
}

}  // namespace cosmos::ui::testing
