// strata-bench-remat-plan: how long the Auto planner's ILP (autograd/remat/ilp.h, GLPK) takes on
// ResNet-50-size planning graphs (issue 8: "ILP solve time for ResNet-50-size graphs", target
// under 10 s), at fast-tier budgets of 50 %, 25 % and 12.5 % of the StoreAll peak.
//
// Three planning graphs of torchvision's ResNet-50 (models/zoo/resnet.h) at --batch B, --image S:
//  - "blocks": the executable chain graph (autograd/remat/plan_exec.h) of conv1, bn1, relu,
//    maxpool, the 16 bottleneck blocks, avgpool, flatten and fc, profiled by
//    AutoChain::build_graph (measured times, bytes and workspaces). Budgets are fractions of the
//    measured StoreAll peak of one training step of that chain.
//  - "steps": the executable op-level graph Auto plans by default (Note [Auto graph execution]):
//    the same chain with every bottleneck block given as its ops (nn::append_remat_steps: conv,
//    bn, relu, ..., downsample, add+relu), profiled and modelled exactly as
//    RematSequential under auto_budget does (measured op times, timed moves, the copies' CPU
//    cost). Budgets as for "blocks".
//  - "ops": an op-level graph of one recorded forward (loss included): every autograd node is an
//    op and its output a value (bytes from its storage when some node saves it, else from its
//    shape); a value's backward uses are the nodes saving its storage, its deps the outputs of its
//    producer's inputs; storages a node saves that no node output owns (batch norm's batch
//    statistics) are that node's internal value. Per-node times are not profiled: forward =
//    output bytes / 10 GB/s + 2 us, backward = twice that, so the graph's structure and bytes are
//    real and its costs a proxy; moves are modelled as the executor's are (timed moves, the
//    copies' CPU cost). Budgets are fractions of the model's StoreAll peak (every value a
//    backward step reads kept).
// For each graph: the min-peak ILP (the smallest budget any plan reaches) and, per budget, the
// plan ILP's status and time (--time-limit, default 60 s so that times above the 10 s target are
// seen), its size, the decisions (keep / stream / recompute / slow counts) and the predicted peak and
// extra time. Nothing is executed but the profiling runs.
//
// --json FILE writes {"binary", "threads", "dtype", "library", "params", "graphs": [{"graph",
// "ops", "values", "storeall_peak_bytes", "storeall_peak_source", "min_peak": {"status",
// "seconds", "bytes"}, "budgets": [{"fraction", "budget_bytes", "status", "seconds", "columns",
// "rows", "keep", "stream", "recompute", "slow", "predicted_peak_bytes", "predicted_extra_seconds"}]}]}.
// --quick (smoke runs): batch 2, image 32, the ops graph only, time limit 20 s.
// --graph picks one graph (default all three).

#include <algorithm>
#include <any>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"
#include "autograd/remat/ilp.h"
#include "autograd/remat/peak.h"
#include "autograd/remat/plan_exec.h"
#include "autograd/saved_tensor.h"
#include "bench/bench_common.h"
#include "core/allocator.h"
#include "core/factories.h"
#include "core/rng.h"
#include "core/threading.h"
#include "models/pooling.h"
#include "models/remat.h"
#include "models/zoo/resnet.h"
#include "ops/dnnl_info.h"
#include "ops/softmax_loss.h"

namespace {

using namespace strata;
using remat::Decision;

constexpr const char* kProg = "strata-bench-remat-plan";
constexpr const char* kUsage =
    "strata-bench-remat-plan [--batch B] [--image S] [--graph blocks|steps|ops|all] [--time-limit SECONDS] "
    "[--threads T] [--json FILE] [--quick]";

struct Options {
  int64_t batch = 4, image = 128;
  std::string graph = "all";
  double time_limit = 60.0;
  int threads = 0;
  std::string json;
  bool quick = false;
};

Options parse(int argc, char** argv) {
  bench::Cli cli(kProg, kUsage);
  Options o;
  bool batch_set = false, image_set = false, graph_set = false, limit_set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batch") {
      o.batch = cli.integer(a, cli.value(argc, argv, i), 1, 4096);
      batch_set = true;
    } else if (a == "--image") {
      o.image = cli.integer(a, cli.value(argc, argv, i), 32, 1024);
      image_set = true;
    } else if (a == "--graph") {
      o.graph = cli.value(argc, argv, i);
      if (o.graph != "blocks" && o.graph != "steps" && o.graph != "ops" && o.graph != "all")
        cli.fail("--graph: expected blocks, steps, ops or all, got '" + o.graph + "'");
      graph_set = true;
    } else if (a == "--time-limit") {
      o.time_limit = cli.real(a, cli.value(argc, argv, i), 0.001, 1e6);
      limit_set = true;
    } else if (a == "--threads") {
      o.threads = cli.threads(a, cli.value(argc, argv, i));
    } else if (a == "--json") {
      o.json = cli.value(argc, argv, i);
    } else if (a == "--quick") {
      o.quick = true;
    } else {
      cli.unknown(a);
    }
  }
  if (o.quick) {
    if (!batch_set) o.batch = 2;
    if (!image_set) o.image = 32;
    if (!graph_set) o.graph = "ops";
    if (!limit_set) o.time_limit = 20.0;
  }
  return o;
}

// ---- the op-level graph -----------------------------------------------------------------------

std::size_t meta_bytes(const std::vector<autograd::TensorMeta>& metas) {
  std::size_t b = 0;
  for (const auto& m : metas) {
    std::size_t numel = 1;
    for (int64_t s : m.sizes) numel *= static_cast<std::size_t>(s);
    b += numel * itemsize(m.dtype);
  }
  return b;
}

remat::PlanGraph op_level_graph(nn::Module& model, const Tensor& x, const Tensor& target) {
  // What every node saves, in order (hooks see detached tensors: storages and saving nodes only).
  struct Save {
    uint64_t node = 0;
    const Allocation* alloc = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Save> saves;
  auto hooks = autograd::make_saved_tensor_hooks(
      [&](const Tensor& v) -> std::any {
        if (v.defined())
          saves.push_back({autograd::saving_node_sequence_nr(), v.storage().allocation(), v.storage().nbytes()});
        return v;
      },
      [](std::any& p) -> Tensor { return std::any_cast<Tensor>(p); });
  Tensor loss;
  {
    autograd::SavedTensorHooksGuard guard(hooks);
    loss = cross_entropy(model.forward(x), target);
  }
  std::set<const Allocation*> existing{x.storage().allocation()};  // parameters, buffers, the input
  for (const Tensor& p : model.parameters()) existing.insert(p.storage().allocation());
  for (const Tensor& b : model.buffers()) existing.insert(b.storage().allocation());
  // The nodes (AccumulateGrad excluded), in recording order.
  std::vector<autograd::Node*> nodes;
  {
    std::set<autograd::Node*> seen;
    std::vector<autograd::Node*> stack{autograd::gradient_edge(loss).node.get()};
    seen.insert(stack.back());
    while (!stack.empty()) {
      autograd::Node* n = stack.back();
      stack.pop_back();
      nodes.push_back(n);
      for (const autograd::Edge& e : n->next_edges())
        if (e.valid() && dynamic_cast<autograd::AccumulateGrad*>(e.node.get()) == nullptr &&
            seen.insert(e.node.get()).second)
          stack.push_back(e.node.get());
    }
    std::sort(nodes.begin(), nodes.end(),
              [](const autograd::Node* a, const autograd::Node* b) { return a->sequence_nr() < b->sequence_nr(); });
  }
  const auto m = static_cast<int64_t>(nodes.size());
  std::unordered_map<const autograd::Node*, int64_t> op_of;
  std::unordered_map<uint64_t, int64_t> op_of_seq;
  for (int64_t k = 0; k < m; ++k) {
    op_of[nodes[k]] = k;
    op_of_seq[nodes[k]->sequence_nr()] = k;
  }
  remat::PlanGraph g;
  g.bandwidth = remat::copy_bandwidth();
  // The executor's model (AutoChain::build_graph): copies take the points their times need and
  // cost the step their CPU time when the compute threads fill the cores.
  g.timed_moves = true;
  g.move_compute_share =
      get_num_threads() >= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) ? 1.0 : 0.0;
  // Value k: node k's outputs; its deps are the outputs of the nodes it reads.
  std::vector<std::vector<int64_t>> reads(static_cast<std::size_t>(m));
  for (int64_t k = 0; k < m; ++k) {
    remat::PlanValue v;
    v.name = nodes[k]->name() + " " + std::to_string(k);
    v.bytes = meta_bytes(nodes[k]->output_meta());
    v.producer = v.last_forward_use = k;
    v.backward_use = -1;
    for (const autograd::Edge& e : nodes[k]->next_edges())
      if (e.valid() && op_of.count(e.node.get())) reads[k].push_back(op_of[e.node.get()]);
    std::sort(reads[k].begin(), reads[k].end());
    reads[k].erase(std::unique(reads[k].begin(), reads[k].end()), reads[k].end());
    v.deps = reads[k];
    g.values.push_back(v);
  }
  for (int64_t k = 0; k < m; ++k)
    for (int64_t j : reads[k]) g.values[j].last_forward_use = std::max(g.values[j].last_forward_use, k);
  // Which value each saved storage is. Saved by node k first: node k's own output if a later saver
  // reads node k (ReLU saving its output, then the next convolution); else the output of the one
  // node k reads whose output has the storage's size (a convolution's output saved by batch norm);
  // else an internal of node k (batch norm's batch statistics, pooling indices).
  std::map<const Allocation*, std::vector<int64_t>> savers;
  std::map<const Allocation*, std::size_t> size_of;
  std::vector<const Allocation*> order;
  for (const Save& s : saves) {
    if (existing.count(s.alloc) || !op_of_seq.count(s.node)) continue;
    auto& list = savers[s.alloc];
    if (list.empty()) order.push_back(s.alloc);
    list.push_back(op_of_seq[s.node]);
    size_of[s.alloc] = s.bytes;
  }
  std::vector<std::set<int64_t>> uses(static_cast<std::size_t>(m));
  std::map<int64_t, int64_t> internal_of;  // op -> its internal value
  for (const Allocation* a : order) {
    const std::vector<int64_t>& list = savers[a];
    const int64_t k = list.front();
    int64_t v = -1;
    for (int64_t later : list)
      if (std::binary_search(reads[later].begin(), reads[later].end(), k)) v = k;
    if (v < 0) {
      std::vector<int64_t> same;
      for (int64_t j : reads[k])
        if (meta_bytes(nodes[j]->output_meta()) == size_of[a]) same.push_back(j);
      if (same.size() == 1) v = same.front();
    }
    if (v >= 0) {
      g.values[v].bytes = std::max(g.values[v].bytes, size_of[a]);
    } else {
      auto [it, fresh] = internal_of.try_emplace(k, static_cast<int64_t>(g.values.size()));
      if (fresh) {
        remat::PlanValue iv;
        iv.name = "int " + nodes[k]->name() + " " + std::to_string(k);
        iv.producer = iv.last_forward_use = k;
        iv.backward_use = -1;
        iv.deps = reads[k];
        g.values.push_back(iv);
        uses.emplace_back();
      }
      v = it->second;
      g.values[v].bytes += size_of[a];
    }
    for (int64_t k2 : list) uses[v].insert(k2);
  }
  for (std::size_t v = 0; v < g.values.size(); ++v) {
    if (uses[v].empty()) continue;
    g.values[v].backward_use = *uses[v].begin();
    g.values[v].extra_backward_uses.assign(std::next(uses[v].begin()), uses[v].end());
  }
  for (int64_t k = 0; k < m; ++k) {
    remat::PlanOp op;
    op.name = nodes[k]->name();
    op.signature = op.name + " " + std::to_string(k);
    const std::size_t out = meta_bytes(nodes[k]->output_meta());
    op.forward_time = static_cast<double>(out) / 10e9 + 2e-6;
    op.backward_time = 2 * op.forward_time;
    op.workspace_bytes = 0;                                                  // the output is value k
    op.backward_workspace_bytes = out + meta_bytes(nodes[k]->input_meta());  // incoming and outgoing gradients
    g.ops.push_back(op);
  }
  g.validate();
  return g;
}

// ---- the block-level graph ----------------------------------------------------------------------

std::vector<std::shared_ptr<nn::Module>> resnet_chain(nn::zoo::ResNet& net) {
  std::vector<std::shared_ptr<nn::Module>> chain{net.child("conv1"), net.child("bn1"), net.child("relu"),
                                                 net.child("maxpool")};
  for (const char* stage : {"layer1", "layer2", "layer3", "layer4"})
    for (auto& [name, block] : net.child(stage)->named_children()) chain.push_back(block);
  chain.push_back(net.child("avgpool"));
  chain.push_back(std::make_shared<nn::Flatten>(1));
  chain.push_back(net.child("fc"));
  return chain;
}

// ---- planning ------------------------------------------------------------------------------------

const char* status_name(remat::IlpStatus s) {
  switch (s) {
    case remat::IlpStatus::Optimal: return "optimal";
    case remat::IlpStatus::Infeasible: return "infeasible";
    case remat::IlpStatus::TimedOut: return "timed out";
  }
  return "?";
}

struct BudgetResult {
  double fraction = 0;
  std::size_t budget = 0;
  remat::IlpResult ilp;
  int keep = 0, stream = 0, recompute = 0, slow = 0;  // slow: placed in the slow tier
  std::size_t predicted_peak = 0;
  double predicted_extra = 0;
};

struct GraphResult {
  std::string name;
  int64_t ops = 0, values = 0;
  std::size_t storeall = 0;
  std::string storeall_source;
  remat::IlpResult min_peak;
  std::size_t min_peak_bytes = 0;
  std::vector<BudgetResult> budgets;
};

GraphResult plan_all(const std::string& name, const remat::PlanGraph& g, std::size_t storeall,
                     const std::string& storeall_source, double time_limit) {
  GraphResult r;
  r.name = name;
  r.ops = static_cast<int64_t>(g.ops.size());
  r.values = static_cast<int64_t>(g.values.size());
  r.storeall = storeall;
  r.storeall_source = storeall_source;
  std::printf("\n%s graph: %lld ops, %lld values; StoreAll peak %zu B (%s)\n", name.c_str(),
              static_cast<long long>(r.ops), static_cast<long long>(r.values), storeall, storeall_source.c_str());
  r.min_peak = remat::solve_min_peak_ilp(g, time_limit);
  if (r.min_peak.status == remat::IlpStatus::Optimal) r.min_peak_bytes = static_cast<std::size_t>(r.min_peak.objective);
  std::printf("  min-peak ILP: %s in %.3f s (%d columns, %d rows)", status_name(r.min_peak.status), r.min_peak.seconds,
              r.min_peak.num_columns, r.min_peak.num_rows);
  if (r.min_peak_bytes > 0)
    std::printf(": minimum budget %zu B = %.1f %% of StoreAll", r.min_peak_bytes,
                100.0 * static_cast<double>(r.min_peak_bytes) / static_cast<double>(storeall));
  std::printf("\n  %8s %12s %11s %9s %7s %7s %6s %6s %6s %6s %12s %10s\n", "budget", "bytes", "status", "seconds",
              "cols", "rows", "keep", "stream", "recomp", "slow", "pred. peak", "extra s");
  for (double f : {0.5, 0.25, 0.125}) {
    BudgetResult b;
    b.fraction = f;
    b.budget = static_cast<std::size_t>(static_cast<double>(storeall) * f);
    b.ilp = remat::solve_plan_ilp(g, b.budget, time_limit);
    if (!b.ilp.decisions.empty()) {  // optimal, or the incumbent of a timed-out solve
      for (Decision d : b.ilp.decisions) {
        b.keep += d == Decision::Keep;
        b.stream += d == Decision::Stream;
        b.recompute += d == Decision::Recompute;
        b.slow += d == Decision::Slow;
      }
      const remat::Evaluation e = remat::evaluate(g, b.ilp.decisions);
      b.predicted_peak = e.peak_bytes;
      b.predicted_extra = e.step_time - e.base_time;
    }
    std::printf("  %7.1f%% %12zu %11s %9.3f %7d %7d", 100 * f, b.budget, status_name(b.ilp.status), b.ilp.seconds,
                b.ilp.num_columns, b.ilp.num_rows);
    if (!b.ilp.decisions.empty())
      std::printf(" %6d %6d %6d %6d %12zu %10.6f\n", b.keep, b.stream, b.recompute, b.slow, b.predicted_peak,
                  b.predicted_extra);
    else
      std::printf("\n");
    r.budgets.push_back(std::move(b));
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.threads > 0) set_num_threads(o.threads);
  const int threads = get_num_threads();
  const std::string library = ops::dnnl_summary();
  std::printf("%s — ResNet-50, batch %lld, image %lld, ILP time limit %g s; %d threads, allocator '%s'\n", kProg,
              static_cast<long long>(o.batch), static_cast<long long>(o.image), o.time_limit, threads,
              std::string(default_allocator().name()).c_str());

  manual_seed(0);
  auto net = std::make_shared<nn::zoo::ResNet>(nn::zoo::resnet_options(50, 1000));
  Tensor x = randn({o.batch, 3, o.image, o.image});
  Tensor target = randint(0, 1000, {o.batch});
  for (auto& p : net->parameters()) p.set_grad(zeros_like(p));  // gradients are not activations
  std::vector<GraphResult> results;

  const bool all = o.graph == "all";
  if (all || o.graph == "blocks" || o.graph == "steps") {
    const auto chain = resnet_chain(*net);
    nn::RematSequential store_all;
    for (const auto& m : chain) store_all.push_back(m);
    remat::measure_fast_peak([&] { cross_entropy(store_all.forward(x), target).backward(); });  // warm-up
    const std::size_t full =
        remat::measure_fast_peak([&] { cross_entropy(store_all.forward(x), target).backward(); }).step_peak_bytes();
    remat::AutoChain probe(full);
    if (all || o.graph == "blocks") {
      std::vector<remat::StepFn> steps;
      for (const auto& m : chain) steps.push_back(nn::remat_step(m));
      const remat::ChainGraph cg = probe.build_graph(steps, x);
      results.push_back(plan_all("blocks", cg.graph, full, "measured", o.time_limit));
    }
    if (all || o.graph == "steps") {
      std::vector<remat::GraphStep> steps;
      int64_t last = -1;
      for (const auto& m : chain) last = nn::append_remat_steps(m, last, steps);
      const remat::ChainGraph cg = probe.build_graph(steps, x);
      results.push_back(plan_all("steps", cg.graph, full, "measured", o.time_limit));
    }
  }
  if (all || o.graph == "ops") {
    const remat::PlanGraph g = op_level_graph(*net, x, target);
    const auto w = remat::value_windows(g);
    std::vector<Decision> store(g.values.size(), Decision::Keep);
    for (std::size_t v = 0; v < w.size(); ++v)
      if (w[v].needs.empty()) store[v] = Decision::Recompute;
    results.push_back(plan_all("ops", g, remat::evaluate(g, store).peak_bytes, "model", o.time_limit));
  }

  if (!o.json.empty()) {
    bench::Json j;
    j.begin_object();
    j.kv("binary", kProg).kv("threads", threads).kv("dtype", "f32").kv("library", library);
    j.key("params").begin_object();
    j.kv("model", "resnet50").kv("batch", static_cast<long long>(o.batch)).kv("image", static_cast<long long>(o.image));
    j.kv("time_limit_s", o.time_limit).kv("graph", o.graph);
    j.end_object();
    j.key("graphs").begin_array();
    for (const GraphResult& r : results) {
      j.begin_object();
      j.kv("graph", r.name).kv("ops", static_cast<long long>(r.ops)).kv("values", static_cast<long long>(r.values));
      j.kv("storeall_peak_bytes", static_cast<long long>(r.storeall)).kv("storeall_peak_source", r.storeall_source);
      j.key("min_peak").begin_object();
      j.kv("status", status_name(r.min_peak.status)).kv("seconds", r.min_peak.seconds);
      j.kv("bytes", static_cast<long long>(r.min_peak_bytes));
      j.end_object();
      j.key("budgets").begin_array();
      for (const BudgetResult& b : r.budgets) {
        j.begin_object();
        j.kv("fraction", b.fraction).kv("budget_bytes", static_cast<long long>(b.budget));
        j.kv("status", status_name(b.ilp.status)).kv("seconds", b.ilp.seconds);
        j.kv("columns", b.ilp.num_columns).kv("rows", b.ilp.num_rows);
        j.kv("keep", b.keep).kv("stream", b.stream).kv("recompute", b.recompute).kv("slow", b.slow);
        j.kv("predicted_peak_bytes", static_cast<long long>(b.predicted_peak));
        j.kv("predicted_extra_seconds", b.predicted_extra);
        j.end_object();
      }
      j.end_array();
      j.end_object();
    }
    j.end_array();
    j.end_object();
    if (!bench::write_file_atomically(o.json, j.str(), kProg)) return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s: %s\n", kProg, e.what());
  return 1;
}
