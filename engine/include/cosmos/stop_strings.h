// Streams text while watching for stop strings: text that might be the start of a stop string is
// held back until it is known not to be, and a completed stop string ends the stream with the
// text before it (the stop string itself is never emitted).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cosmos {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);

  // Adds text; returns what can be emitted now. After a stop string completes, stopped() is true
  // and later pushes return nothing.
  std::string push(std::string_view text);
  // End of stream: the held-back text (no stop string completed).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace cosmos
