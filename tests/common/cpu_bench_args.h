// What the CPU microbenchmarks (bench_cpu_matmul, bench_quantize) share: the 7B model's layer
// shapes and their "--name value" command lines.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace cosmos::testing {

struct LayerShape {
  const char* name;
  std::int64_t rows, cols;
};
// Cosmos-Reason1-7B (Qwen2.5-VL-7B): hidden 3584, 28 heads of 128, 4 KV heads, MLP 18944.
inline constexpr LayerShape k7bLayer[] = {{"q", 3584, 3584},    {"k", 512, 3584},     {"v", 512, 3584},
                                          {"o", 3584, 3584},    {"gate", 18944, 3584}, {"up", 18944, 3584},
                                          {"down", 3584, 18944}};

// "a,b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

// Reads "--name value" pairs into the named strings and (at least 1) integers; false, after saying
// why on stderr, for an unknown option.
inline bool parse_bench_args(int argc, char** argv, const std::map<std::string, std::string*>& text,
                             const std::map<std::string, int*>& numbers) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (const auto t = text.find(a); t != text.end()) {
      *t->second = v;
    } else if (const auto n = numbers.find(a); n != numbers.end()) {
      *n->second = std::max(1, std::atoi(v.c_str()));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace cosmos::testing
