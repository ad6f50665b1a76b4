// The FlatIR verifier's elementwise rule comes from the primitive table (ew_ops.def): each
// elementwise fn is accepted on exactly the dtypes its row allows and rejected, naming the op,
// elsewhere.
#include <gtest/gtest.h>

#include <string>

#include "flat/ir.h"
#include "flat/ir_text.h"

namespace tripy::flat {
namespace {

TEST(VerifyElementwise, EveryFnFollowsItsTableRow) {
  const DType dtypes[] = {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kBool};
  int checked = 0;
  for (const rt::EwOpInfo& r : rt::kEwOps) {
    if (r.form != rt::EwForm::kUnary && r.form != rt::EwForm::kBinary && r.form != rt::EwForm::kCompare) continue;
    for (DType dt : dtypes) {
      const std::string t = dtype_short_name(dt);
      const std::string out = r.form == rt::EwForm::kCompare ? "i1" : t;
      std::string text = "%0 : " + t + "[3] = parameter() {index = 0}\n%1 : " + t + "[3] = parameter() {index = 1}\n";
      text += "%2 : " + out + "[3] = " + r.name + (r.form == rt::EwForm::kUnary ? "(%0)" : "(%0, %1)") + "\nreturn %2\n";
      auto g = parse_graph(text);
      ASSERT_TRUE(g.ok()) << text << g.status().message();
      Status st = verify(*g);
      if (rt::ew_defined_on(r.op, rt::compute_kind(dt))) {
        EXPECT_TRUE(st.ok()) << r.name << " on " << t << ": " << st.message();
      } else {
        EXPECT_FALSE(st.ok()) << r.name << " on " << t;
        EXPECT_NE(st.message().find("%2 = " + std::string(r.name) + ": is not defined on " +
                                    std::string(dtype_name(dt)) + " operands"),
                  std::string::npos)
            << st.message();
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace tripy::flat
