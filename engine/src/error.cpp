#include "cosmos/error.h"

namespace cosmos {

const char* to_string(ErrorCategory category) {
  switch (category) {
    case ErrorCategory::bad_input: return "bad input";
    case ErrorCategory::unsupported_model: return "unsupported model";
    case ErrorCategory::out_of_memory: return "out of memory";
    case ErrorCategory::cancelled: return "cancelled";
    case ErrorCategory::io: return "I/O error";
    case ErrorCategory::internal: return "internal error";
  }
  return "error";
}

}  // namespace cosmos
