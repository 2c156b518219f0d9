// The pipeline's calibration adapter feeding the quantizer: GPTQ selected by the quantizer's
// `method` option, its per-tensor output SQNR (RTN before → stored after) in compilation.json,
// report.json and report.html, reuse on an unchanged re-run and a re-run when the method
// changes; AWQ by the same option; config errors for a bad method or a calibrated method without
// calibration, before any stage runs.
#include <filesystem>

#include "pipeline/pipeline.h"
#include "pipeline_test_util.h"
#include "test_util.h"

namespace slm::pipeline {
namespace {
namespace fs = std::filesystem;
using slm::testing::MakeTempDir;
using slm::testing::Quiet;
using slm::testing::ReadFile;
using slm::testing::ReadJson;
using slm::testing::SourceDir;

// The demo config quantizing with `method`, without inference and evaluation (kept fast).
ConfigDoc GptqConfig(const std::string& artifact_dir, const std::string& method) {
  auto doc = LoadYamlConfig(SourceDir() + "/configs/stories260k.yaml");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  ConfigDoc d = std::move(doc).value();
  d.root["artifact_dir"] = artifact_dir;
  d.root["stages"]["quantization"]["quantizer"] = {{"name", "8da4w"}, {"options", {{"group", 32}, {"method", method}}}};
  d.root["stages"]["inference"]["enabled"] = false;
  d.root["stages"]["evaluation"]["enabled"] = false;
  return d;
}

std::string StatusOf(const RunReport& r, StageId id) {
  for (const auto& s : r.stages) {
    if (s.stage == id) return s.status;
  }
  return "";
}

TEST(PipelineGptq, CalibrationFeedsGptqAndTheReportCarriesOutputSqnrBeforeAndAfter) {
  const std::string dir = MakeTempDir("pipe-gptq");
  ConfigDoc d = GptqConfig(dir, "gptq");
  {
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(StatusOf(*r, StageId::kCompilation), "ran");
    const nlohmann::json q = ReadJson(dir + "/compilation.json")["quantization"];
    ASSERT_TRUE(q.contains("tensors")) << q.dump();
    EXPECT_EQ(q["method"], "gptq");
    int gptq_tensors = 0;
    for (const auto& t : q["tensors"]) {
      if (t["use"] != "linear") continue;
      EXPECT_EQ(t["method"], "gptq") << t.dump();
      ASSERT_TRUE(t["output_sqnr_db"].is_number()) << t.dump();
      EXPECT_GE(t["output_sqnr_db"].get<double>(), t["rtn_output_sqnr_db"].get<double>() - 0.01) << t.dump();
      EXPECT_GT(t["calibration_rows"].get<int64_t>(), 0);
      ++gptq_tensors;
    }
    EXPECT_EQ(gptq_tensors, 35);  // 5 layers × q, k, v, o, gate, up, down
    EXPECT_EQ(ReadJson(dir + "/report.json")["quantization"]["method"], "gptq");
    EXPECT_NE(ReadFile(dir + "/report.html").find("output SQNR"), std::string::npos);
  }
  {  // Unchanged: reused, and the restored state still carries the quantization report.
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok());
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(StatusOf(*r, StageId::kQuantization), "reused");
    EXPECT_EQ(StatusOf(*r, StageId::kCompilation), "reused");
    EXPECT_EQ(ReadJson(dir + "/report.json")["quantization"]["method"], "gptq");
  }
  {  // The method is part of the quantizer's fingerprint: back to rtn re-runs from quantization.
    d = GptqConfig(dir, "rtn");
    auto p = Pipeline::FromConfig(d);
    ASSERT_TRUE(p.ok());
    auto r = (*p)->Run(Quiet());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(StatusOf(*r, StageId::kModelPreparation), "reused");
    EXPECT_EQ(StatusOf(*r, StageId::kQuantization), "ran");
    EXPECT_EQ(StatusOf(*r, StageId::kCompilation), "ran");
    const nlohmann::json q = ReadJson(dir + "/compilation.json")["quantization"];
    for (const auto& t : q["tensors"]) {
      if (t["use"] != "linear") continue;
      EXPECT_EQ(t["method"], "rtn");
      // With rtn the calibration still yields the output SQNR (before = after).
      EXPECT_EQ(t["output_sqnr_db"], t["rtn_output_sqnr_db"]);
    }
  }
}

TEST(PipelineGptq, AwqMethodScalesEveryLinearTensorAndChecksItsGrid) {
  const std::string dir = MakeTempDir("pipe-awq");
  ConfigDoc d = GptqConfig(dir, "awq");
  d.root["stages"]["quantization"]["quantizer"]["options"]["awq_grid"] = 0;
  auto bad = Pipeline::FromConfig(d);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("awq_grid"), std::string::npos) << bad.status().message();
  d.root["stages"]["quantization"]["quantizer"]["options"]["awq_grid"] = 10;
  auto p = Pipeline::FromConfig(d);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto r = (*p)->Run(Quiet());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json q = ReadJson(dir + "/compilation.json")["quantization"];
  EXPECT_EQ(q["method"], "awq");
  int awq_tensors = 0;
  for (const auto& t : q["tensors"]) {
    if (t["use"] != "linear") continue;
    EXPECT_EQ(t["method"], "awq") << t.dump();
    ASSERT_TRUE(t["rtn_output_sqnr_db"].is_number()) << t.dump();
    ++awq_tensors;
  }
  EXPECT_EQ(awq_tensors, 35);
}

TEST(PipelineGptq, UnknownMethodAndGptqWithoutCalibrationFailBeforeAnyStageRuns) {
  const std::string dir = MakeTempDir("pipe-gptq-bad");
  {
    ConfigDoc d = GptqConfig(dir + "/out", "smoothquant");
    auto p = Pipeline::FromConfig(d);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("stages.quantization.quantizer.options.method"), std::string::npos)
        << p.status().message();
    EXPECT_NE(p.status().message().find("smoothquant"), std::string::npos) << p.status().message();
  }
  for (const char* method : {"gptq", "awq", "awq+gptq"}) {
    ConfigDoc d = GptqConfig(dir + "/out", method);
    d.root["stages"]["quantization"].erase("calibration");
    auto p = Pipeline::FromConfig(d);
    ASSERT_FALSE(p.ok()) << method;
    EXPECT_NE(p.status().message().find("stages.quantization.calibration"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(std::string("(method ") + method + ")"), std::string::npos)
        << p.status().message();
  }
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

}  // namespace
}  // namespace slm::pipeline
