#include "llm/conformance.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

namespace slm::llm {
namespace {

int32_t Argmax(const float* x, int64_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::abs(a[i] - b[i]);
    if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
  }
  return m;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Suite {
 public:
  Suite(std::shared_ptr<const runtime::Program> program, const ConformanceOptions& o) : program_(std::move(program)), o_(o) {}

  Status Run(ConformanceReport& report);

 private:
  Result<std::unique_ptr<Session>> NewSession(TailPolicy p) {
    SessionOptions so;
    so.tail_policy = p;
    so.allocator = o_.allocator;
    so.method_cost_ms = costs_;
    return Session::Create(program_, so);
  }
  std::span<const int32_t> S(int64_t begin, int64_t end) const {
    return std::span<const int32_t>(seq_).subspan(begin, end - begin);
  }
  // Compares logits after position `p` (i.e. of token p) with the reference.
  void Check(ConformanceCase& c, const std::vector<float>& got, int64_t p) {
    const std::vector<float>& want = ref_.at(p);
    CheckLogits(c, got, want, "logits of position " + std::to_string(p));
    if (Argmax(got.data(), V_) != Argmax(want.data(), V_)) Fail(c, "argmax of position " + std::to_string(p) + " differs");
  }
  // |got − want| <= tolerance × LogitScale(want), recorded in the case.
  void CheckLogits(ConformanceCase& c, const std::vector<float>& got, const std::vector<float>& want,
                   const std::string& what) {
    const float d = MaxAbsDiff(got, want), scale = LogitScale(want);
    c.max_logit_diff = std::max(c.max_logit_diff, d);
    c.max_scaled_logit_diff = std::max(c.max_scaled_logit_diff, d / scale);
    if (!(d <= o_.logit_tolerance * scale)) {
      Fail(c, what + " differ by " + std::to_string(d) + " (largest |logit| " + std::to_string(scale) + ")");
    }
  }
  static void Fail(ConformanceCase& c, const std::string& why) {
    if (c.passed) c.detail = why;
    c.passed = false;
  }
  static bool Ok(ConformanceCase& c, const Status& st, const std::string& what) {
    if (st.ok()) return true;
    Fail(c, what + ": " + st.ToString());
    return false;
  }
  ConformanceCase& Add(ConformanceReport& r, std::string name) {
    r.cases.push_back({std::move(name), true, 0, 0, ""});
    return r.cases.back();
  }
  void Need(int64_t p) { needed_.insert(p); }

  std::shared_ptr<const runtime::Program> program_;
  ConformanceOptions o_;
  std::map<std::string, double> costs_;
  int64_t V_ = 0, M_ = 0;
  std::vector<int32_t> seq_;
  std::set<int64_t> needed_;
  std::map<int64_t, std::vector<float>> ref_;  // position -> reference logits of that token
};

Status Suite::Run(ConformanceReport& report) {
  // The auto policy's costs are measured once, by the first auto session, and reused.
  SLM_ASSIGN_OR_RETURN(auto probe, NewSession(TailPolicy::kAuto));
  costs_ = probe->method_cost_ms();
  const io::ContractMetadata& meta = probe->metadata();
  V_ = meta.vocab_size;
  M_ = meta.max_context_len;
  std::vector<int64_t> steps;
  for (const io::MethodInfo& mi : meta.methods) {
    if (mi.role == "prefill") steps.push_back(mi.step);
  }
  std::sort(steps.begin(), steps.end());
  const int64_t smin = steps.empty() ? 2 : steps.front();
  const int64_t smax = steps.empty() ? 2 : steps.back();

  std::mt19937 rng(o_.seed);
  const int32_t lo = V_ > 4 ? 3 : 0;
  seq_.resize(M_);
  for (int64_t i = 0; i < M_; ++i) seq_[i] = lo + static_cast<int32_t>(rng() % static_cast<uint32_t>(V_ - lo));
  if (meta.bos_id) seq_[0] = *meta.bos_id;

  auto clamp = [&](int64_t n) { return std::clamp<int64_t>(n, 1, M_); };
  std::set<int64_t> lengths = {1, 2};
  for (int64_t s : steps) {
    for (int64_t n : {s - 1, s, s + 1, 2 * s - 1, 2 * s + 1}) lengths.insert(clamp(n));
  }
  int64_t sum = 1;
  for (int64_t s : steps) sum += s;
  lengths.insert(clamp(sum));
  lengths.insert(clamp(smax + smin - 1));
  std::set<int64_t> near_k = {1, 2, std::max<int64_t>(1, smin - 1), smin + 1, smax + 1};
  const int64_t a = std::min<int64_t>(M_ - 1, smin + 1);
  const int64_t b = std::min<int64_t>(M_, std::max(a + 1, 2 * smax + 3));
  const int64_t c = std::max<int64_t>(1, a / 2 + 1);
  for (int64_t n : lengths) Need(n - 1);
  for (int64_t k : near_k) {
    if (k < M_) { Need(M_ - k - 1); Need(M_ - 1); }
  }
  for (int64_t p : {a - 1, b - 1, c - 1}) Need(p);

  // Reference: one token at a time through decode, over the whole sequence.
  {
    SLM_ASSIGN_OR_RETURN(auto ref, NewSession(TailPolicy::kDecode));
    std::vector<float> last(V_);
    for (int64_t i = 0; i < M_; ++i) {
      SLM_RETURN_IF_ERROR(ref->FeedDecodeOnly(S(i, i + 1), last));
      if (needed_.count(i)) ref_[i] = last;
    }
  }

  const TailPolicy policies[] = {TailPolicy::kPad, TailPolicy::kDecode, TailPolicy::kAuto};
  std::vector<float> got(V_), got2(V_);
  for (TailPolicy p : policies) {
    const std::string pn = TailPolicyName(p);
    SLM_ASSIGN_OR_RETURN(auto s, NewSession(p));

    for (int64_t n : lengths) {
      ConformanceCase& cs = Add(report, "prefill len=" + std::to_string(n) + " tail=" + pn);
      s->Reset(/*clear=*/true);  // stale rows must not hide a mask bug
      if (Ok(cs, s->Feed(S(0, n), got), "Feed")) {
        Check(cs, got, n - 1);
        if (s->pos() != n) Fail(cs, "pos " + std::to_string(s->pos()) + " after " + std::to_string(n) + " tokens");
      }
    }

    // Greedy generation: prompt through the path under test, then one token per call, against
    // the same on the decode-only path.
    for (int64_t n : {clamp(smin + 1), clamp(smax + smin - 1)}) {
      const int64_t g = std::min<int64_t>(o_.greedy_tokens, M_ - n);
      if (g < 1) continue;
      ConformanceCase& cs = Add(report, "greedy prompt=" + std::to_string(n) + " +" + std::to_string(g) + " tail=" + pn);
      SLM_ASSIGN_OR_RETURN(auto ref, NewSession(TailPolicy::kDecode));
      std::vector<float> want(V_);
      s->Reset(true);
      if (!Ok(cs, ref->FeedDecodeOnly(S(0, n), want), "FeedDecodeOnly") || !Ok(cs, s->Feed(S(0, n), got), "Feed")) continue;
      std::vector<int32_t> want_tokens, got_tokens;
      for (int64_t k = 0; k < g; ++k) {
        CheckLogits(cs, got, want, "logits of generated token " + std::to_string(k));
        want_tokens.push_back(Argmax(want.data(), V_));
        got_tokens.push_back(Argmax(got.data(), V_));
        if (k + 1 == g) break;
        if (!Ok(cs, ref->FeedDecodeOnly(std::span<const int32_t>(&want_tokens.back(), 1), want), "FeedDecodeOnly") ||
            !Ok(cs, s->Feed(std::span<const int32_t>(&got_tokens.back(), 1), got), "Feed")) break;
      }
      if (got_tokens != want_tokens) Fail(cs, "greedy tokens differ from the one-token path");
    }

    // Near-context tails: fill to max_context - k, a refused request of k + 1 tokens (must
    // change nothing), then the last k tokens; bit-exact against the same without the refusal.
    for (int64_t k : near_k) {
      if (k >= M_) continue;
      ConformanceCase& cs = Add(report, "near-context tail=" + std::to_string(k) + " (refused " + std::to_string(k + 1) + " first) tail=" + pn);
      s->Reset(true);
      if (!Ok(cs, s->Feed(S(0, M_ - k), got), "Feed prefix")) continue;
      Check(cs, got, M_ - k - 1);
      Status refused = s->Feed(S(M_ - k - 1, M_), got2);
      if (refused.code() != ErrorCode::kOutOfRange) Fail(cs, "a request past the context was not refused with OutOfRange: " + refused.ToString());
      if (s->pos() != M_ - k) Fail(cs, "the refused request moved pos to " + std::to_string(s->pos()));
      if (!Ok(cs, s->Feed(S(M_ - k, M_), got), "Feed tail")) continue;
      Check(cs, got, M_ - 1);
      SLM_ASSIGN_OR_RETURN(auto fresh, NewSession(p));
      if (Ok(cs, fresh->Feed(S(0, M_ - k), got2), "fresh Feed prefix") && Ok(cs, fresh->Feed(S(M_ - k, M_), got2), "fresh Feed tail") &&
          !BitEqual(got, got2)) {
        Fail(cs, "refused-then-accepted differs from accepted on a fresh session");
      }
      if (s->CheckCapacity(1).code() != ErrorCode::kOutOfRange) Fail(cs, "a full context accepts one more token");
    }
  }

  SLM_ASSIGN_OR_RETURN(auto s, NewSession(TailPolicy::kPad));
  // Reset, with and without clearing: equals a fresh session bit for bit.
  for (bool clear : {false, true}) {
    ConformanceCase& cs = Add(report, std::string("reset clear=") + (clear ? "yes" : "no") + " equals fresh");
    std::vector<int32_t> junk(seq_.rbegin(), seq_.rbegin() + b);
    s->Reset();
    if (!Ok(cs, s->Feed(junk, got), "Feed junk")) continue;
    s->Reset(clear);
    if (s->pos() != 0 || !s->history().empty()) Fail(cs, "pos/history not cleared by Reset");
    if (!Ok(cs, s->Feed(S(0, b), got), "Feed")) continue;
    Check(cs, got, b - 1);
    SLM_ASSIGN_OR_RETURN(auto fresh, NewSession(TailPolicy::kPad));
    if (Ok(cs, fresh->Feed(S(0, b), got2), "fresh Feed") && !BitEqual(got, got2)) Fail(cs, "differs from a fresh session");
  }
  // Fork: both copies continue identically and match the reference.
  {
    ConformanceCase& cs = Add(report, "fork at " + std::to_string(a) + " continue to " + std::to_string(b));
    s->Reset(true);
    if (Ok(cs, s->Feed(S(0, a), got), "Feed")) {
      auto f = s->Fork();
      if (Ok(cs, f.status(), "Fork")) {
        if (Ok(cs, (*f)->Feed(S(a, b), got2), "Feed fork") && Ok(cs, s->Feed(S(a, b), got), "Feed original")) {
          Check(cs, got2, b - 1);
          if (!BitEqual(got, got2)) Fail(cs, "the fork and the original differ");
        }
      }
    }
  }
  // Snapshot -> restore into a fresh session -> continue; bit-exact with the original.
  {
    ConformanceCase& cs = Add(report, "snapshot at " + std::to_string(a) + " restore, continue to " + std::to_string(b));
    std::string dir = o_.temp_dir.empty() ? std::filesystem::temp_directory_path().string() : o_.temp_dir;
    const std::string path = dir + "/staticlm-conformance-" + std::to_string(::getpid()) + ".snap";
    s->Reset(true);
    if (Ok(cs, s->Feed(S(0, a), got), "Feed") && Ok(cs, s->SaveSnapshot(path), "SaveSnapshot")) {
      SLM_ASSIGN_OR_RETURN(auto t, NewSession(TailPolicy::kPad));
      if (Ok(cs, t->LoadSnapshot(path), "LoadSnapshot")) {
        if (t->pos() != a) Fail(cs, "restored pos " + std::to_string(t->pos()));
        if (Ok(cs, t->Feed(S(a, b), got2), "Feed restored") && Ok(cs, s->Feed(S(a, b), got), "Feed original")) {
          Check(cs, got2, b - 1);
          if (!BitEqual(got, got2)) Fail(cs, "restored session differs from the original");
        }
      }
    }
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  // Prefix reuse: extend (only new tokens computed), then shrink (rewinds when it can).
  {
    ConformanceCase& cs = Add(report, "prefix reuse " + std::to_string(a) + " -> " + std::to_string(b) + " -> " + std::to_string(c));
    s->Reset(true);
    FeedReport r1, r2;
    if (Ok(cs, s->Feed(S(0, a), got), "Feed") && Ok(cs, s->FeedWithPrefixReuse(S(0, b), got, &r1), "FeedWithPrefixReuse")) {
      Check(cs, got, b - 1);
      if (r1.tokens_reused != a || r1.tokens_computed != b - a) {
        Fail(cs, "extend: reused " + std::to_string(r1.tokens_reused) + " computed " + std::to_string(r1.tokens_computed) +
                     ", expected " + std::to_string(a) + " / " + std::to_string(b - a));
      }
      if (Ok(cs, s->FeedWithPrefixReuse(S(0, c), got, &r2), "FeedWithPrefixReuse (shorter)")) {
        Check(cs, got, c - 1);
        if (r2.tokens_reused + r2.tokens_computed != c) Fail(cs, "shrink: reused + computed != " + std::to_string(c));
      }
    }
  }
  // Rewind: allowed unless a ring has wrapped; then it must be refused and change nothing.
  {
    ConformanceCase& cs = Add(report, "rewind " + std::to_string(b) + " -> " + std::to_string(a));
    s->Reset(true);
    bool wrapped = false;
    for (const io::CacheGroup& g : meta.groups) wrapped |= g.cache_len < M_ && b > g.cache_len;
    if (Ok(cs, s->Feed(S(0, b), got), "Feed")) {
      Status st = s->Rewind(b - a);
      if (wrapped) {
        if (st.code() != ErrorCode::kFailedPrecondition) Fail(cs, "rewind over a wrapped ring was not refused: " + st.ToString());
        if (s->pos() != b) Fail(cs, "a refused rewind moved pos");
        cs.detail = "refused as required (ring wrapped)";
      } else if (Ok(cs, st, "Rewind")) {
        if (s->pos() != a) Fail(cs, "pos " + std::to_string(s->pos()) + " after rewind");
        if (Ok(cs, s->Feed(S(a, b), got), "Feed after rewind")) Check(cs, got, b - 1);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int64_t ConformanceReport::failed() const {
  return std::count_if(cases.begin(), cases.end(), [](const ConformanceCase& c) { return !c.passed; });
}

std::string ConformanceReport::ToTable() const {
  size_t w = 4;
  for (const ConformanceCase& c : cases) w = std::max(w, c.name.size());
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-*s  %-6s  %-11s  %-11s  %s\n", static_cast<int>(w), "case", "result", "max|dlogit|",
                "/max|logit|", "detail");
  out += line;
  for (const ConformanceCase& c : cases) {
    std::snprintf(line, sizeof(line), "%-*s  %-6s  %-11.3g  %-11.3g  ", static_cast<int>(w), c.name.c_str(), c.passed ? "pass" : "FAIL",
                  static_cast<double>(c.max_logit_diff), static_cast<double>(c.max_scaled_logit_diff));
    out += line + c.detail + "\n";
  }
  out += artifact + ": " + std::to_string(cases.size() - failed()) + " passed, " + std::to_string(failed()) + " failed\n";
  return out;
}

nlohmann::json ConformanceReport::ToJson() const {
  nlohmann::json j;
  j["artifact"] = artifact;
  j["passed"] = passed();
  j["failed"] = failed();
  j["cases"] = nlohmann::json::array();
  for (const ConformanceCase& c : cases) {
    j["cases"].push_back({{"name", c.name},
                          {"passed", c.passed},
                          {"max_logit_diff", c.max_logit_diff},
                          {"max_scaled_logit_diff", c.max_scaled_logit_diff},
                          {"detail", c.detail}});
  }
  return j;
}

float LogitScale(std::span<const float> logits) {
  float m = 1.0f;
  for (float v : logits) m = std::max(m, std::abs(v));
  return m;
}

Result<ConformanceReport> RunConformance(std::shared_ptr<const runtime::Program> program, const ConformanceOptions& options) {
  ConformanceReport report;
  report.artifact = program->artifact().path();
  ConformanceOptions o = options;
  auto meta = io::ContractMetadata::FromJson(program->artifact().metadata_json());
  if (meta.ok() && meta->cache_format == io::kCacheFormatInt8) {
    o.logit_tolerance = std::max(o.logit_tolerance, o.int8_cache_logit_tolerance);
  }
  Suite suite(std::move(program), o);
  SLM_RETURN_IF_ERROR(suite.Run(report));
  return report;
}

Result<ConformanceReport> RunConformance(const std::string& artifact_path, const ConformanceOptions& options) {
  SLM_ASSIGN_OR_RETURN(auto program, runtime::Program::Load(artifact_path));
  return RunConformance(std::shared_ptr<const runtime::Program>(std::move(program)), options);
}

}  // namespace slm::llm
