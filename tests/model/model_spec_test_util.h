// Helpers shared by the config.json parsing tests (model_spec_test.cc, family_spec_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/model_spec.h"

namespace slm::testing {

// ParseModelSpec's error for `config` (read as test/config.json); fails the test and returns Ok
// when the config is accepted.
inline Status ParseError(const nlohmann::json& config) {
  auto spec = model::ParseModelSpec(config, "test/config.json");
  EXPECT_FALSE(spec.ok()) << "accepted " << config.dump();
  return spec.ok() ? Status::Ok() : spec.status();
}

}  // namespace slm::testing
