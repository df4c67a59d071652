// COSMOS_QGEMV_TUNING's parser (kernels/qgemv_tuning_spec.h): shapes by name and by size, every key,
// entries merged per shape, and each kind of bad entry left out with an error naming it.
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "kernels/qgemv_tuning_spec.h"

namespace cosmos::kernels {
namespace {

struct Good {
  const char* text;
  int rows, cols;
  int field;  // QGemvTuning's field order: rows loads pipeline l2 stage mma tile wide
  int value;
};

class QGemvTuningGood : public ::testing::TestWithParam<Good> {};

TEST_P(QGemvTuningGood, SetsExactlyThatKnobOfThatShape) {
  const Good& g = GetParam();
  const QGemvTuningSpec spec = parse_qgemv_tuning(g.text);
  EXPECT_TRUE(spec.errors.empty()) << spec.errors.front();
  ASSERT_EQ(spec.shapes.size(), 1u);
  const QGemvShapeKnobs* k = find_knobs(spec, g.rows, g.cols);
  ASSERT_NE(k, nullptr);
  for (int f = 0; f < QGemvShapeKnobs::kFields; ++f) {
    EXPECT_EQ(k->set[f], f == g.field) << QGemvShapeKnobs::kKeys[f];
    if (f == g.field) {
      EXPECT_EQ(k->value[f], g.value);
    }
  }
  EXPECT_EQ(find_knobs(spec, g.cols, g.rows == g.cols ? g.rows + 1 : g.rows), nullptr);  // another shape
}

INSTANTIATE_TEST_SUITE_P(Rows, QGemvTuningGood,
                         ::testing::Values(Good{"down/loads=4", 3584, 18944, 1, 4}, Good{"qkv/rows=2", 4608, 3584, 0, 2},
                                           Good{"o/wide=0", 3584, 3584, 7, 0}, Good{"gateup/pipeline=1", 37888, 3584, 2, 1},
                                           Good{"lm_head/mma=4", 152064, 3584, 5, 4}, Good{"512x3584/tile=8", 512, 3584, 6, 8},
                                           Good{"down/l2=-1", 3584, 18944, 3, -1}, Good{"down/stage=0;", 3584, 18944, 4, 0}));

TEST(QGemvTuningSpec, EntriesOfOneShapeMergeAndShapesStayApart) {
  const QGemvTuningSpec spec = parse_qgemv_tuning("down/loads=4,rows=2;o/wide=1;3584x18944/loads=8,pipeline=0");
  EXPECT_TRUE(spec.errors.empty());
  ASSERT_EQ(spec.shapes.size(), 2u);
  const QGemvShapeKnobs* d = find_knobs(spec, 3584, 18944);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->value[1], 8);  // the later entry wins
  EXPECT_EQ(d->value[0], 2);  // and keeps the earlier one's other keys
  EXPECT_TRUE(d->set[2]);
  EXPECT_EQ(d->value[2], 0);
  const QGemvShapeKnobs* o = find_knobs(spec, 3584, 3584);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->value[7], 1);
  EXPECT_FALSE(o->set[1]);
}

struct Bad {
  const char* text;
  const char* says;  // part of the error
};

class QGemvTuningBad : public ::testing::TestWithParam<Bad> {};

TEST_P(QGemvTuningBad, IsLeftOutWithAnErrorAndTheGoodEntryStays) {
  const Bad& b = GetParam();
  const QGemvTuningSpec spec = parse_qgemv_tuning(std::string(b.text) + ";o/wide=1");
  ASSERT_EQ(spec.errors.size(), 1u);
  EXPECT_NE(spec.errors[0].find(b.says), std::string::npos) << spec.errors[0];
  EXPECT_NE(spec.errors[0].find(b.text), std::string::npos) << "the error names the entry: " << spec.errors[0];
  ASSERT_EQ(spec.shapes.size(), 1u);
  EXPECT_NE(find_knobs(spec, 3584, 3584), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Rows, QGemvTuningBad,
                         ::testing::Values(Bad{"up/loads=4", "SHAPE"}, Bad{"downloads=4", "SHAPE"}, Bad{"0x3584/loads=4", "SHAPE"},
                                           Bad{"12x/loads=4", "SHAPE"}, Bad{"down/", "no key"}, Bad{"down/load=4", "unknown key"},
                                           Bad{"down/loads", "unknown key"}, Bad{"down/loads=5", "not allowed"},
                                           Bad{"down/loads=x", "not allowed"}, Bad{"down/wide=2", "not allowed"},
                                           Bad{"down/rows=3", "not allowed"}, Bad{"down/loads=4,mma=1", "not allowed"},
                                           Bad{"down/loads=-", "not allowed"}, Bad{"down:loads=4", "SHAPE"}));

TEST(QGemvTuningSpec, EmptyTextHasNoKnobs) {
  for (const char* t : {"", ";", ";;"}) {
    const QGemvTuningSpec spec = parse_qgemv_tuning(t);
    EXPECT_TRUE(spec.shapes.empty() && spec.errors.empty()) << t;
  }
}

}  // namespace
}  // namespace cosmos::kernels
