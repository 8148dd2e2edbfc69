#include <gtest/gtest.h>

#include "ops/dnnl_info.h"

namespace strata::ops {

TEST(DnnlInfo, LoadedLibraryIsTheV3ApiWeCompiledAgainst) {
  const DnnlInfo info = dnnl_info();
  EXPECT_GE(info.major, 3) << "Strata needs the oneDNN v3 API";
  const std::string loaded =
      std::to_string(info.major) + "." + std::to_string(info.minor) + "." + std::to_string(info.patch);
  EXPECT_EQ(loaded, info.header_version) << "libdnnl loaded from the wrong place";
  EXPECT_EQ(info.cpu_runtime, STRATA_DNNL_CPU_RUNTIME);
}

TEST(DnnlInfo, SummaryNamesVersionAndRuntime) {
  const std::string s = dnnl_summary();
  EXPECT_NE(s.find("oneDNN " + dnnl_info().header_version), std::string::npos) << s;
  EXPECT_NE(s.find(dnnl_info().cpu_runtime), std::string::npos) << s;
}

}  // namespace strata::ops
