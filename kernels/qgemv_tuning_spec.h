// Per-shape knobs for the quantized matrix-vector kernel (kernels/gemv_quant.cu) from the
// environment, so that an engine A/B on one GPU (tests/gpu/ab.sh) can try a product's launch
// variants without a build per variant:
//   COSMOS_QGEMV_TUNING="down/loads=4;qkv/rows=2,pipeline=1;3584x3584/wide=0"
// ('/' after the shape, not ':', which tests/gpu/ab.sh takes between a variant's settings).
// A shape is rows x cols of the product as launched (gate/up with SwiGLU: both halves' rows) or
// one of the 7B's names: qkv 4608x3584, o 3584x3584, gateup 37888x3584, down 3584x18944, lm_head
// 152064x3584. Keys, as QGemvTuning's fields (kernels/gemv_quant.cuh): rows (0 auto, 1, 2, 4),
// loads (0 auto, 4, 7, 8), pipeline, l2, stage, wide (-1 auto, 0, 1), mma (-1 auto, 0, 2, 4), tile
// (0 auto, 4, 8). The kernel takes a value only where that shape has such a variant; otherwise it
// keeps its automatic choice, as for bench_gemv_quant's knobs. Pure C++ (no CUDA): the parser is
// tested on the CPU (tests/unit/test_qgemv_tuning_spec.cpp).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cosmos::kernels {

// One shape's knobs: value[k] where set[k], in QGemvTuning's field order.
struct QGemvShapeKnobs {
  static constexpr int kFields = 8;
  static constexpr std::array<std::string_view, kFields> kKeys = {"rows", "loads", "pipeline", "l2", "stage", "mma", "tile", "wide"};
  int rows = 0, cols = 0;  // the product's shape
  std::array<int, kFields> value{};
  std::array<bool, kFields> set{};
};

struct QGemvTuningSpec {
  std::vector<QGemvShapeKnobs> shapes;
  std::vector<std::string> errors;  // one line per entry left out, saying why
};

namespace qgemv_spec_detail {

inline bool parse_int(std::string_view s, int& out) {
  if (s.empty() || s.size() > 9) return false;
  bool neg = s.front() == '-';
  if (neg) s.remove_prefix(1);
  if (s.empty()) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = neg ? -v : v;
  return true;
}

inline bool shape_of(std::string_view name, int& rows, int& cols) {
  struct Named {
    std::string_view name;
    int rows, cols;
  };
  static constexpr Named kNamed[] = {{"qkv", 4608, 3584}, {"o", 3584, 3584}, {"gateup", 37888, 3584}, {"down", 3584, 18944}, {"lm_head", 152064, 3584}};
  for (const Named& n : kNamed)
    if (name == n.name) return rows = n.rows, cols = n.cols, true;
  const std::size_t x = name.find('x');
  return x != std::string_view::npos && parse_int(name.substr(0, x), rows) && parse_int(name.substr(x + 1), cols) && rows > 0 &&
         cols > 0;
}

inline bool allowed(int field, int v) {
  switch (field) {
    case 0: return v == 0 || v == 1 || v == 2 || v == 4;                // rows
    case 1: return v == 0 || v == 4 || v == 7 || v == 8;                // loads
    case 5: return v == -1 || v == 0 || v == 2 || v == 4;               // mma
    case 6: return v == 0 || v == 4 || v == 8;                          // tile
    default: return v == -1 || v == 0 || v == 1;                        // pipeline, l2, stage, wide
  }
}

}  // namespace qgemv_spec_detail

// Parses "shape/key=value,...;shape/..." (spaces not allowed). An entry with an unknown shape, key
// or value is left out whole, with an error naming it; a later entry for the same shape adds to it.
inline QGemvTuningSpec parse_qgemv_tuning(std::string_view text) {
  using namespace qgemv_spec_detail;
  QGemvTuningSpec spec;
  while (!text.empty()) {
    const std::size_t semi = text.find(';');
    const std::string_view entry = text.substr(0, semi);
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (entry.empty()) continue;
    const auto fail = [&](std::string_view why) {
      std::string e(1, '\'');
      e.append(entry).append("': ").append(why);
      spec.errors.push_back(std::move(e));
    };
    const std::size_t slash = entry.find('/');
    QGemvShapeKnobs k;
    if (slash == std::string_view::npos || !shape_of(entry.substr(0, slash), k.rows, k.cols)) {
      fail("expected SHAPE/key=value,... with SHAPE one of qkv, o, gateup, down, lm_head or ROWSxCOLS");
      continue;
    }
    std::string_view rest = entry.substr(slash + 1);
    bool ok = !rest.empty();
    if (!ok) fail("no key=value after the shape");
    while (ok && !rest.empty()) {
      const std::size_t comma = rest.find(',');
      const std::string_view kv = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      const std::size_t eq = kv.find('=');
      int field = -1, v = 0;
      for (int f = 0; f < QGemvShapeKnobs::kFields && eq != std::string_view::npos; ++f)
        if (kv.substr(0, eq) == QGemvShapeKnobs::kKeys[f]) field = f;
      if (field < 0) {
        fail(std::string("unknown key in '").append(kv).append("' (rows, loads, pipeline, l2, stage, mma, tile, wide)"));
        ok = false;
      } else if (!parse_int(kv.substr(eq + 1), v) || !allowed(field, v)) {
        fail(std::string("value not allowed in '").append(kv).append("'"));
        ok = false;
      } else {
        k.value[field] = v;
        k.set[field] = true;
      }
    }
    if (!ok) continue;
    QGemvShapeKnobs* same = nullptr;
    for (QGemvShapeKnobs& s : spec.shapes)
      if (s.rows == k.rows && s.cols == k.cols) same = &s;
    if (!same) {
      spec.shapes.push_back(k);
      continue;
    }
    for (int f = 0; f < QGemvShapeKnobs::kFields; ++f)
      if (k.set[f]) same->value[f] = k.value[f], same->set[f] = true;
  }
  return spec;
}

// The knobs for rows x cols, or nullptr.
inline const QGemvShapeKnobs* find_knobs(const QGemvTuningSpec& spec, int rows, int cols) {
  for (const QGemvShapeKnobs& s : spec.shapes)
    if (s.rows == rows && s.cols == cols) return &s;
  return nullptr;
}

}  // namespace cosmos::kernels
