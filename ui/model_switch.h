// Replacing the loaded model with another (a precision switch, another folder) without losing the
// first one needlessly. The new model loads while the old one is still in memory, so a failed or
// cancelled load leaves everything as it was. But both are then in memory at once: on a GPU that
// holds either alone (bf16 15.9 GB and int8 8.0 GB on a 24 GB card), the switch would fail only
// because of the old one. So, when the new model does not fit, the old one is released and the new
// one tried again; if it still does not fit, the old one is loaded back and the error says so (and
// says when even that failed, leaving no model loaded).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cosmos/error.h"

namespace cosmos::ui {

struct SwitchOutcome {
  bool retriedAlone = false;    // the old model was released for a second attempt
  bool restored = false;        // ... which failed too, and the old model was loaded back
};

// current: the loaded model (may be null). loadNew / loadOld: load the requested / the current
// model. Returns the new model, for the caller to put in place of current (until then the old one
// stays where it is, unless it had to be released for the second attempt: then current is null).
// On failure current holds the old model (as it was, or loaded again) or, if even that failed,
// nothing.
template <typename T>
cosmos::Result<std::unique_ptr<T>> switchModel(std::unique_ptr<T>& current,
                                               const std::function<cosmos::Result<std::unique_ptr<T>>()>& loadNew,
                                               const std::function<cosmos::Result<std::unique_ptr<T>>()>& loadOld,
                                               SwitchOutcome* outcome = nullptr) {
  SwitchOutcome local;
  SwitchOutcome& o = outcome ? *outcome : local;
  auto next = loadNew();
  if (next || next.error().category != cosmos::ErrorCategory::out_of_memory || !current) return next;
  // Not enough memory with the old model loaded: try alone.
  current.reset();
  o.retriedAlone = true;
  auto alone = loadNew();
  if (alone) return alone;
  cosmos::Error e = alone.error();
  auto back = loadOld();
  if (back) {
    current = std::move(*back);
    o.restored = true;
    e.message += " (the previous model was loaded again)";
  } else {
    e.message += " (and the previous model could not be loaded again: " + back.error().message + ")";
  }
  return e;
}

}  // namespace cosmos::ui
