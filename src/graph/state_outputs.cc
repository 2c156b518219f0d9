#include "graph/state_outputs.h"

namespace slm::graph {

std::string StateOutputName(const std::string& state_name) {
  const size_t dot = state_name.rfind('.');
  if (dot == std::string::npos) return state_name + "_out";
  return state_name.substr(0, dot) + "_out" + state_name.substr(dot);
}

Result<std::vector<StateOutputBinding>> AddStateOutputs(Graph& g) {
  std::vector<StateOutputBinding> bindings;
  const std::vector<int32_t> inputs = g.inputs;  // AddValue may grow g.values, not g.inputs
  for (int32_t id : inputs) {
    if (g.values[id].kind != ValueKind::kState) continue;
    const std::string state = g.values[id].name;
    const std::string out_name = StateOutputName(state);
    if (g.FindValue(out_name) >= 0) {
      return InvalidArgument("method '" + g.name + "': cannot add state output '" + out_name + "' for '" + state +
                             "': the name is taken (state outputs added twice?)");
    }
    Value v;
    v.name = out_name;
    v.dtype = g.values[id].dtype;
    v.shape = g.values[id].shape;
    v.kind = ValueKind::kOutput;
    const int32_t out = g.AddValue(std::move(v));
    Op op;
    op.kind = OpKind::kCopy;
    op.inputs = {id};
    op.outputs = {out};
    op.debug = state + " (state output)";
    g.AddOp(std::move(op));
    g.outputs.push_back(out);
    bindings.push_back({out_name, state});
  }
  SLM_RETURN_IF_ERROR(g.Validate());
  return bindings;
}

}  // namespace slm::graph
