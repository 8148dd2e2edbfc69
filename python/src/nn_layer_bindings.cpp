// strata._C.nn's containers and layers (Sequential, ModuleList, Linear, Conv2d, ..., the transformer
// layers, Conv1d, ConvTranspose2d, GroupNorm, ModuleDict, ParameterList) over the Module protocol of
// nn_bindings.cpp (Note [Python modules]).

#include <pybind11/stl.h>

#include <cctype>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/remat/plan_exec.h"
#include "bindings.h"
#include "core/factories.h"
#include "models/activation.h"
#include "models/attention.h"
#include "models/container.h"
#include "models/conv.h"
#include "models/dropout.h"
#include "models/embedding_bag.h"
#include "models/linear.h"
#include "models/module.h"
#include "models/normalization.h"
#include "models/pooling.h"
#include "models/remat.h"
#include "nn_support.h"

namespace strata::python::nn_support {

// ---- containers ---------------------------------------------------------------------------------

template <class C>
py::object container_getitem(py::object self, py::handle index, const char* type) {
  C& c = init_as<C>(self);
  const auto n = static_cast<int64_t>(c.size());
  if (py::isinstance<py::slice>(index)) {
    auto slots = slots_of(c);
    std::size_t start = 0, stop = 0, step = 0, len = 0;
    if (!py::reinterpret_borrow<py::slice>(index).compute(slots.size(), &start, &stop, &step, &len))
      throw py::error_already_set();
    auto out = std::make_shared<C>();
    for (std::size_t i = 0; i < len; ++i) {
      const auto& [name, mod] = slots[start + i * step];
      out->register_module(name, mod);
    }
    return py::cast(out);
  }
  const int64_t i = int_from_py(index, type, "index");
  if (i < -n || i >= n) throw BindingIndexError(msg("index ", i, " is out of range for ", type, " of length ", n));
  return module_object(c[i]);
}

template <class C>
void container_append(C& c, py::handle module, const char* type) {
  c.push_back(module_arg(module, type, "append"));
}

template <class C>
void bind_list_methods(py::class_<C, PyModuleT<C>, Module, py::smart_holder>& cls, const char* type) {
  cls.def("__len__", [](py::handle self_c) { return init_as<C>(self_c).size(); })
      .def("__getitem__", [type](py::object self, py::handle index) { return container_getitem<C>(self, index, type); })
      .def("__iter__",
           [](py::handle self_c) {
             const C& c = init_as<C>(self_c);
             py::list out;
             for (std::size_t i = 0; i < c.size(); ++i) out.append(module_object(c[static_cast<int64_t>(i)]));
             return py::iter(out);
           })
      .def(
          "append",
          [type](py::object self, py::handle module) {
            container_append(init_as<C>(self), module, type);
            return self;
          },
          py::arg("module"))
      .def(
          "extend",
          [type](py::object self, py::iterable modules) {
            for (py::handle m : modules) container_append(init_as<C>(self), m, type);
            return self;
          },
          py::arg("modules"))
      .def("__setitem__", [type](py::handle self_c, py::handle index, py::handle module) {
        C& c = init_as<C>(self_c);
        const auto n = static_cast<int64_t>(c.size());
        int64_t i = int_from_py(index, type, "index");
        if (i < -n || i >= n)
          throw BindingIndexError(msg("index ", i, " is out of range for ", type, " of length ", n));
        if (i < 0) i += n;
        auto slots = slots_of(c);
        c.register_module(slots[static_cast<std::size_t>(i)].first, module_arg(module, type, "__setitem__"));
      });
}

/// Sequential(*modules) or Sequential(OrderedDict of name -> module); takes ownership of `s`.
template <class S>
S* fill_sequential(S* s, const py::args& args) {
  std::unique_ptr<S> owned(s);
  if (args.size() == 1 && py::hasattr(args[0], "items") && !is_module(args[0])) {
    for (py::handle kv : args[0].attr("items")()) {
      auto pair = py::reinterpret_borrow<py::tuple>(kv);
      if (!py::isinstance<py::str>(pair[0]))
        throw BindingTypeError(msg("Sequential.__init__: module names must be strings, got ", type_name(pair[0])));
      s->register_module(pair[0].cast<std::string>(), module_arg(pair[1], "Sequential", "__init__"));
    }
  } else {
    for (py::handle a : args) s->push_back(module_arg(a, "Sequential", "__init__"));
  }
  return owned.release();
}

void bind_containers(py::module_& nnm) {
  py::class_<nn::Sequential, PyModuleT<nn::Sequential>, Module, py::smart_holder> seq(
      nnm, "Sequential",
      "Runs its children in order (torch.nn.Sequential): Sequential(*modules) or Sequential(OrderedDict).");
  seq.def(py::init([](const py::args& args) { return fill_sequential(new nn::Sequential(), args); },
                   [](const py::args& args) { return fill_sequential(new PyModuleT<nn::Sequential>(), args); }));
  bind_list_methods(seq, "Sequential");

  // RematSequential(*modules, policy=None): a Sequential run under a chain policy (models/remat.h).
  py::class_<nn::RematSequential, PyModuleT<nn::RematSequential>, nn::Sequential, py::smart_holder> rs(
      nnm, "RematSequential",
      "A Sequential whose forward runs its children under a rematerialization policy "
      "(strata.remat): RematSequential(*modules, policy=strata.remat.auto(budget_bytes)).");
  auto policy_arg = [](py::handle policy) -> remat::ChainPolicy {
    if (!py::isinstance<remat::ChainPolicy>(policy))
      throw BindingTypeError(
          msg("RematSequential: policy must be a strata.remat policy (strata.remat.auto(...), "
              "strata.remat.every_k(...), ...), got ",
              type_name(policy)));
    return policy.cast<remat::ChainPolicy>();
  };
  rs.def(py::init(
             [policy_arg](const py::args& args, py::handle policy) {
               auto* s = fill_sequential(new nn::RematSequential(), args);
               if (!policy.is_none()) s->set_policy(policy_arg(policy));
               return s;
             },
             [policy_arg](const py::args& args, py::handle policy) {
               auto* s = fill_sequential(new PyModuleT<nn::RematSequential>(), args);
               if (!policy.is_none()) s->set_policy(policy_arg(policy));
               return s;
             }),
         py::kw_only(), py::arg("policy") = py::none());
  rs.def_property(
      "policy", [](const nn::RematSequential& s) { return s.policy(); },
      [policy_arg](nn::RematSequential& s, py::handle policy) { s.set_policy(policy_arg(policy)); });
  auto auto_of = [](const nn::RematSequential& s, const char* what) -> const remat::AutoChain& {
    if (!s.policy().auto_chain)
      throw Error(
          msg("RematSequential.", what, ": the policy is ", s.policy().to_string(), "; only strata.remat.auto plans"));
    return *s.policy().auto_chain;
  };
  rs.def(
      "explain",
      [auto_of](const nn::RematSequential& s) {
        const remat::AutoChain& a = auto_of(s, "explain");
        if (a.last_plan() == nullptr) throw Error("RematSequential.explain: no plan yet; run a forward first");
        return a.explain();
      },
      "Auto only: per saved value its bytes, recompute cost and decision, the predicted peak and "
      "time, and the measured peak of the last step.");
  rs.def(
      "last_plan",
      [auto_of](const nn::RematSequential& s) -> py::object {
        const remat::AutoChain& a = auto_of(s, "last_plan");
        const remat::Plan* p = a.last_plan();
        if (p == nullptr) return py::none();
        int keep = 0, stream = 0, recompute = 0, slow = 0;
        for (remat::Decision d : p->decisions) {
          keep += d == remat::Decision::Keep;
          stream += d == remat::Decision::Stream;
          recompute += d == remat::Decision::Recompute;
          slow += d == remat::Decision::Slow;  // placed in the slow tier, used there
        }
        py::dict out;
        std::string source = remat::to_string(p->source);  // "ILP", "Greedy", ...: lower case in Python
        for (char& c : source) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out["source"] = source;
        out["solve_seconds"] = p->solve_seconds;
        out["ilp_timed_out"] = p->ilp_timed_out;
        out["sync_prefetch"] = p->sync_prefetch;  // streamed values fetched at their need points
        out["sync_evict"] = p->sync_evict;        // evictions finish before the next op runs
        out["budget_bytes"] = p->budget_bytes;
        out["points"] = a.last_graph()->graph.num_points();
        out["values"] = p->decisions.size();
        out["keep"] = keep;
        out["stream"] = stream;
        out["recompute"] = recompute;
        out["slow"] = slow;
        out["predicted_peak_bytes"] = p->predicted.peak_bytes;
        out["predicted_step_seconds"] = p->predicted.step_time;
        out["predicted_base_seconds"] = p->predicted.base_time;
        out["measured_peak_bytes"] = a.measured_peak_bytes();
        out["plans_made"] = a.plans_made();
        return out;
      },
      "Auto only: a summary of the plan of the last forward (None before the first).");

  py::class_<nn::ModuleList, PyModuleT<nn::ModuleList>, Module, py::smart_holder> ml(
      nnm, "ModuleList", "Holds modules in a list (torch.nn.ModuleList); it has no forward.");
  auto make_list = [](auto* l, py::object modules) {
    if (!modules.is_none()) {
      if (!py::isinstance<py::iterable>(modules) || is_module(modules))
        throw BindingTypeError(msg("ModuleList: expected an iterable of modules, got ", type_name(modules)));
      for (py::handle m : modules) l->push_back(module_arg(m, "ModuleList", "__init__"));
    }
    return l;
  };
  ml.def(py::init([make_list](py::object modules) { return make_list(new nn::ModuleList(), modules); },
                  [make_list](py::object modules) { return make_list(new PyModuleT<nn::ModuleList>(), modules); }),
         py::arg("modules") = py::none());
  bind_list_methods(ml, "ModuleList");

  py::class_<nn::Flatten, PyModuleT<nn::Flatten>, Module, py::smart_holder>(nnm, "Flatten")
      .def(STRATA_MODULE_INIT(nn::Flatten, (int64_t start_dim, int64_t end_dim), (start_dim, end_dim)),
           py::arg("start_dim") = 1, py::arg("end_dim") = -1);
}

// ---- layers -------------------------------------------------------------------------------------

template <class T>
using Layer = py::class_<T, PyModuleT<T>, Module, py::smart_holder>;

void bind_layers(py::module_& nnm) {
  Layer<nn::Linear>(nnm, "Linear", "y = x W^T + b (torch.nn.Linear).")
      .def(STRATA_MODULE_INIT(nn::Linear, (int64_t in_features, int64_t out_features, bool bias),
                              (in_features, out_features, bias)),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true)
      .def_property_readonly("in_features", &nn::Linear::in_features)
      .def_property_readonly("out_features", &nn::Linear::out_features);

  Layer<nn::Identity>(nnm, "Identity").def(STRATA_MODULE_INIT(nn::Identity, (const py::args&, const py::kwargs&), ()));

  Layer<nn::Conv2d>(nnm, "Conv2d", "2-D convolution (torch.nn.Conv2d, padding_mode 'zeros').")
      .def(STRATA_MODULE_INIT(
               nn::Conv2d,
               (int64_t in_channels, int64_t out_channels, py::handle kernel_size, py::handle stride,
                py::handle padding, py::handle dilation, int64_t groups, bool bias, const std::string& padding_mode),
               (in_channels, out_channels, size2_arg(kernel_size, "Conv2d", "kernel_size"),
                size2_arg(stride, "Conv2d", "stride"), size2_arg(padding, "Conv2d", "padding"),
                size2_arg(dilation, "Conv2d", "dilation"), groups, bias, padding_mode)),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("padding_mode") = "zeros")
      .def_property_readonly("in_channels", &nn::Conv2d::in_channels)
      .def_property_readonly("out_channels", &nn::Conv2d::out_channels);

  Layer<nn::BatchNorm1d>(nnm, "BatchNorm1d")
      .def(STRATA_MODULE_INIT(nn::BatchNorm1d,
                              (int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                               bool track_running_stats, bool bias),
                              (num_features, eps, momentum, affine, track_running_stats, bias)),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true, py::arg("bias") = true)
      .def_property_readonly("num_features", &nn::BatchNorm::num_features);
  Layer<nn::BatchNorm2d>(nnm, "BatchNorm2d")
      .def(STRATA_MODULE_INIT(nn::BatchNorm2d,
                              (int64_t num_features, double eps, std::optional<double> momentum, bool affine,
                               bool track_running_stats, bool bias),
                              (num_features, eps, momentum, affine, track_running_stats, bias)),
           py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true,
           py::arg("track_running_stats") = true, py::arg("bias") = true)
      .def_property_readonly("num_features", &nn::BatchNorm::num_features);
  Layer<nn::LayerNorm>(nnm, "LayerNorm")
      .def(STRATA_MODULE_INIT(
               nn::LayerNorm, (py::handle normalized_shape, double eps, bool elementwise_affine, bool bias),
               (size_arg(normalized_shape, "LayerNorm", "normalized_shape"), eps, elementwise_affine, bias)),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true,
           py::arg("bias") = true);

  Layer<nn::ReLU>(nnm, "ReLU")
      .def(STRATA_MODULE_INIT_CHECKED(nn::ReLU, (bool inplace), refuse(inplace, "ReLU", "inplace=True"), ()),
           py::arg("inplace") = false);
  Layer<nn::LeakyReLU>(nnm, "LeakyReLU")
      .def(STRATA_MODULE_INIT_CHECKED(nn::LeakyReLU, (double negative_slope, bool inplace),
                                      refuse(inplace, "LeakyReLU", "inplace=True"), (negative_slope)),
           py::arg("negative_slope") = 0.01, py::arg("inplace") = false);
  Layer<nn::Sigmoid>(nnm, "Sigmoid").def(STRATA_MODULE_INIT(nn::Sigmoid, (), ()));
  Layer<nn::Tanh>(nnm, "Tanh").def(STRATA_MODULE_INIT(nn::Tanh, (), ()));
  Layer<nn::GELU>(nnm, "GELU")
      .def(STRATA_MODULE_INIT(nn::GELU, (const std::string& approximate), (approximate)),
           py::arg("approximate") = "none");
  Layer<nn::Dropout>(nnm, "Dropout")
      .def(STRATA_MODULE_INIT_CHECKED(nn::Dropout, (double p, bool inplace), refuse(inplace, "Dropout", "inplace=True"),
                                      (p)),
           py::arg("p") = 0.5, py::arg("inplace") = false)
      .def_property_readonly("p", &nn::Dropout::p);

  Layer<nn::MaxPool2d>(nnm, "MaxPool2d")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::MaxPool2d,
               (py::handle kernel_size, py::handle stride, py::handle padding, py::handle dilation, bool return_indices,
                bool ceil_mode),
               refuse(return_indices, "MaxPool2d", "return_indices=True"),
               (size2_arg(kernel_size, "MaxPool2d", "kernel_size"), opt_size2(stride, "MaxPool2d", "stride"),
                size2_arg(padding, "MaxPool2d", "padding"), size2_arg(dilation, "MaxPool2d", "dilation"), ceil_mode)),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
           py::arg("return_indices") = false, py::arg("ceil_mode") = false);
  Layer<nn::AvgPool2d>(nnm, "AvgPool2d")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::AvgPool2d,
               (py::handle kernel_size, py::handle stride, py::handle padding, bool ceil_mode, bool count_include_pad,
                py::handle divisor_override),
               refuse(!divisor_override.is_none(), "AvgPool2d", "divisor_override"),
               (size2_arg(kernel_size, "AvgPool2d", "kernel_size"), opt_size2(stride, "AvgPool2d", "stride"),
                size2_arg(padding, "AvgPool2d", "padding"), ceil_mode, count_include_pad)),
           py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
           py::arg("count_include_pad") = true, py::arg("divisor_override") = py::none());
  Layer<nn::AdaptiveAvgPool2d>(nnm, "AdaptiveAvgPool2d")
      .def(STRATA_MODULE_INIT(nn::AdaptiveAvgPool2d, (py::handle output_size),
                              (size2_arg(output_size, "AdaptiveAvgPool2d", "output_size"))),
           py::arg("output_size"));

  Layer<nn::EmbeddingBag>(nnm, "EmbeddingBag",
                          "Sums or averages bags of embedding rows (torch.nn.EmbeddingBag; modes 'sum' and 'mean').")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::EmbeddingBag,
               (int64_t num_embeddings, int64_t embedding_dim, py::handle max_norm, double norm_type,
                bool scale_grad_by_freq, const std::string& mode, bool sparse, py::handle _weight,
                bool include_last_offset, py::handle padding_idx),
               refuse(!max_norm.is_none(), "EmbeddingBag", "max_norm");
               (void)norm_type; refuse(scale_grad_by_freq, "EmbeddingBag", "scale_grad_by_freq=True");
               refuse(sparse, "EmbeddingBag", "sparse=True"); refuse(!_weight.is_none(), "EmbeddingBag", "_weight");
               refuse(!padding_idx.is_none(), "EmbeddingBag", "padding_idx"),
               (num_embeddings, embedding_dim, mode, include_last_offset)),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("max_norm") = py::none(),
           py::arg("norm_type") = 2.0, py::arg("scale_grad_by_freq") = false, py::arg("mode") = "mean",
           py::arg("sparse") = false, py::arg("_weight") = py::none(), py::arg("include_last_offset") = false,
           py::arg("padding_idx") = py::none())
      .def(
          "forward",
          [](nn::EmbeddingBag& m, const Tensor& input, std::optional<Tensor> offsets,
             std::optional<Tensor> per_sample_weights) {
            py::gil_scoped_release release;
            return m.forward(input, offsets.value_or(Tensor()), per_sample_weights.value_or(Tensor()));
          },
          py::arg("input"), py::arg("offsets") = py::none(), py::arg("per_sample_weights") = py::none());
}

// ---- issue 26 parts 7-8: Embedding, SiLU, Softmax, LogSoftmax, MultiheadAttention, TransformerEncoderLayer

std::optional<Tensor> none_or_tensor(py::handle h, const char* op, const char* name) {
  if (h.is_none()) return std::nullopt;
  return tensor_arg(h, op, name);
}

void bind_embedding(py::module_& nnm) {
  Layer<nn::Embedding>(nnm, "Embedding", "A lookup table of embedding rows (torch.nn.Embedding).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::Embedding,
               (int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx,
                std::optional<double> max_norm, double norm_type, bool scale_grad_by_freq, bool sparse),
               refuse(scale_grad_by_freq, "Embedding", "scale_grad_by_freq=True");
               refuse(sparse, "Embedding", "sparse=True"),
               (num_embeddings, embedding_dim, padding_idx, max_norm, norm_type)),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::arg("padding_idx") = py::none(),
           py::arg("max_norm") = py::none(), py::arg("norm_type") = 2.0, py::arg("scale_grad_by_freq") = false,
           py::arg("sparse") = false)
      .def_static(
          "from_pretrained",
          [](const Tensor& embeddings, bool freeze, std::optional<int64_t> padding_idx, std::optional<double> max_norm,
             double norm_type) {
            STRATA_CHECK(embeddings.dim() == 2,
                         "Embedding.from_pretrained: embeddings parameter is expected to be "
                         "2-dimensional, got ",
                         embeddings.describe());
            auto m = std::make_shared<nn::Embedding>(embeddings.size(0), embeddings.size(1), padding_idx, max_norm,
                                                     norm_type);
            m->register_parameter("weight", embeddings.detach(), !freeze);
            return m;
          },
          py::arg("embeddings"), py::arg("freeze") = true, py::arg("padding_idx") = py::none(),
          py::arg("max_norm") = py::none(), py::arg("norm_type") = 2.0)
      .def_property_readonly("num_embeddings", &nn::Embedding::num_embeddings)
      .def_property_readonly("embedding_dim", &nn::Embedding::embedding_dim)
      .def_property_readonly("padding_idx", &nn::Embedding::padding_idx);
}

void bind_attention(py::module_& nnm) {
  Layer<nn::MultiheadAttention>(nnm, "MultiheadAttention", "Multi-head attention (torch.nn.MultiheadAttention).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::MultiheadAttention,
               (int64_t embed_dim, int64_t num_heads, double dropout, bool bias, bool add_bias_kv, bool add_zero_attn,
                std::optional<int64_t> kdim, std::optional<int64_t> vdim, bool batch_first),
               refuse(add_bias_kv, "MultiheadAttention", "add_bias_kv=True");
               refuse(add_zero_attn, "MultiheadAttention", "add_zero_attn=True"),
               (embed_dim, num_heads, dropout, bias, kdim, vdim, batch_first)),
           py::arg("embed_dim"), py::arg("num_heads"), py::arg("dropout") = 0.0, py::arg("bias") = true,
           py::arg("add_bias_kv") = false, py::arg("add_zero_attn") = false, py::arg("kdim") = py::none(),
           py::arg("vdim") = py::none(), py::arg("batch_first") = false)
      .def(
          "forward",
          [](nn::MultiheadAttention& m, py::handle query, py::handle key, py::handle value, py::handle key_padding_mask,
             bool need_weights, py::handle attn_mask, bool average_attn_weights, bool is_causal) {
            const char* op = "MultiheadAttention.forward";
            const Tensor q = tensor_arg(query, op, "query"), k = tensor_arg(key, op, "key"),
                         v = tensor_arg(value, op, "value");
            const Tensor kpm = none_or_tensor(key_padding_mask, op, "key_padding_mask").value_or(Tensor());
            const Tensor am = none_or_tensor(attn_mask, op, "attn_mask").value_or(Tensor());
            nn::MultiheadAttention::Output out;
            {
              py::gil_scoped_release release;
              out = m.forward(q, k, v, kpm, need_weights, am, average_attn_weights, is_causal);
            }
            return py::make_tuple(out.output, out.weights.defined() ? py::cast(out.weights) : py::none());
          },
          py::arg("query"), py::arg("key"), py::arg("value"), py::arg("key_padding_mask") = py::none(),
          py::arg("need_weights") = true, py::arg("attn_mask") = py::none(), py::arg("average_attn_weights") = true,
          py::arg("is_causal") = false)
      .def_property_readonly("embed_dim", &nn::MultiheadAttention::embed_dim)
      .def_property_readonly("num_heads", &nn::MultiheadAttention::num_heads)
      .def_property_readonly("batch_first", &nn::MultiheadAttention::batch_first)
      .def_property_readonly("dropout", &nn::MultiheadAttention::dropout);

  Layer<nn::TransformerEncoderLayer>(nnm, "TransformerEncoderLayer",
                                     "Self-attention and feed-forward block (torch.nn.TransformerEncoderLayer).")
      .def(py::init([](int64_t d_model, int64_t nhead, int64_t dim_feedforward, double dropout,
                       const std::string& activation, double layer_norm_eps, bool batch_first, bool norm_first,
                       bool bias) {
             nn::TransformerEncoderLayerOptions o{dim_feedforward, dropout,    activation, layer_norm_eps,
                                                  batch_first,     norm_first, bias};
             return new PyModuleT<nn::TransformerEncoderLayer>(d_model, nhead, o);
           }),
           py::arg("d_model"), py::arg("nhead"), py::arg("dim_feedforward") = 2048, py::arg("dropout") = 0.1,
           py::arg("activation") = "relu", py::arg("layer_norm_eps") = 1e-5, py::arg("batch_first") = false,
           py::arg("norm_first") = false, py::arg("bias") = true)
      .def(
          "forward",
          [](nn::TransformerEncoderLayer& m, py::handle src, py::handle src_mask, py::handle src_key_padding_mask,
             bool is_causal) {
            const char* op = "TransformerEncoderLayer.forward";
            const Tensor x = tensor_arg(src, op, "src");
            const Tensor mask = none_or_tensor(src_mask, op, "src_mask").value_or(Tensor());
            const Tensor kpm = none_or_tensor(src_key_padding_mask, op, "src_key_padding_mask").value_or(Tensor());
            py::gil_scoped_release release;
            return m.forward(x, mask, kpm, is_causal);
          },
          py::arg("src"), py::arg("src_mask") = py::none(), py::arg("src_key_padding_mask") = py::none(),
          py::arg("is_causal") = false)
      .def_property_readonly("norm_first", [](const nn::TransformerEncoderLayer& m) { return m.options().norm_first; });
}

void bind_transformer_layers(py::module_& nnm) {
  Layer<nn::SiLU>(nnm, "SiLU")
      .def(STRATA_MODULE_INIT_CHECKED(nn::SiLU, (bool inplace), refuse(inplace, "SiLU", "inplace=True"), ()),
           py::arg("inplace") = false);
  Layer<nn::Softmax>(nnm, "Softmax")
      .def(STRATA_MODULE_INIT(nn::Softmax, (std::optional<int64_t> dim), (dim)), py::arg("dim") = py::none())
      .def_property_readonly("dim", &nn::Softmax::dim);
  Layer<nn::LogSoftmax>(nnm, "LogSoftmax")
      .def(STRATA_MODULE_INIT(nn::LogSoftmax, (std::optional<int64_t> dim), (dim)), py::arg("dim") = py::none())
      .def_property_readonly("dim", &nn::LogSoftmax::dim);
  bind_embedding(nnm);
  bind_attention(nnm);
}

/// An int or a 1-sequence of one int (Conv1d's kernel_size, stride, dilation, padding).
int64_t n_ints_1d(py::handle h) {
  const Dims d = int_list_from_sequence(h, "Conv1d", "argument");
  if (d.size() != 1) throw BindingValueError(msg("Conv1d: expected an int or a 1-tuple, got ", d.size(), " values"));
  return d[0];
}

// ---- issue 26 part 7: Conv1d, ConvTranspose2d, GroupNorm, ModuleDict, ParameterList -----------------

/// A ModuleDict key: a str without '.', not empty (KeyError otherwise, as PyTorch's add_module).
std::string dict_key(py::handle key) {
  if (!py::isinstance<py::str>(key))
    throw BindingTypeError(msg("ModuleDict: module name should be a string, got ", type_name(key)));
  std::string k = key.cast<std::string>();
  if (k.empty() || k.find('.') != std::string::npos)
    throw py::key_error(msg("module name can't contain \".\" or be empty, got: '", k, "'"));
  return k;
}

/// ModuleDict.update / __init__: a mapping (its items()) or an iterable of (key, module) pairs.
void dict_update(nn::ModuleDict& d, py::handle modules) {
  if (modules.is_none()) return;
  if (is_module(modules) || !py::isinstance<py::iterable>(modules))
    throw BindingTypeError(
        msg("ModuleDict.update should be called with an iterable of key/value pairs, but got ", type_name(modules)));
  py::object items =
      py::hasattr(modules, "items") ? modules.attr("items")() : py::reinterpret_borrow<py::object>(modules);
  for (py::handle kv : items) {
    py::sequence pair = py::reinterpret_borrow<py::sequence>(kv);
    if (!py::isinstance<py::sequence>(kv) || py::len(pair) != 2)
      throw BindingTypeError("ModuleDict.update: every element must be a (key, module) pair");
    d.insert(dict_key(pair[0]), module_arg(pair[1], "ModuleDict", "update"));
  }
}

void bind_module_dict(py::module_& nnm) {
  using D = nn::ModuleDict;
  py::class_<D, PyModuleT<D>, Module, py::smart_holder> md(
      nnm, "ModuleDict", "Holds modules by string key in insertion order (torch.nn.ModuleDict); it has no forward.");
  md.def(py::init(
             [](py::handle modules) {
               auto* d = new D();
               dict_update(*d, modules);
               return d;
             },
             [](py::handle modules) {
               auto* d = new PyModuleT<D>();
               dict_update(*d, modules);
               return d;
             }),
         py::arg("modules") = py::none());
  auto get = [](py::handle self, py::handle key) {
    const D& d = init_as<D>(self);
    const std::string k = py::isinstance<py::str>(key) ? key.cast<std::string>() : std::string();
    if (!py::isinstance<py::str>(key) || !d.contains(k)) throw py::key_error(py::str(key).cast<std::string>());
    return module_object(d[k]);
  };
  md.def("__getitem__", get)
      .def("__setitem__",
           [](py::handle self, py::handle key, py::handle module) {
             init_as<D>(self).insert(dict_key(key), module_arg(module, "ModuleDict", "__setitem__"));
           })
      .def("__delitem__",
           [get](py::handle self, py::handle key) {
             get(self, key);
             init_as<D>(self).pop(key.cast<std::string>());
           })
      .def("__len__", [](py::handle self) { return init_as<D>(self).size(); })
      .def("__iter__", [](py::handle self) { return py::iter(py::cast(init_as<D>(self).keys())); })
      .def("__contains__",
           [](py::handle self, py::handle key) {
             return py::isinstance<py::str>(key) && init_as<D>(self).contains(key.cast<std::string>());
           })
      .def("keys", [](py::handle self) { return init_as<D>(self).keys(); })
      .def("values",
           [](py::handle self) {
             py::list out;
             const D& d = init_as<D>(self);
             for (const std::string& k : d.keys()) out.append(module_object(d[k]));
             return out;
           })
      .def("items",
           [](py::handle self) {
             py::list out;
             const D& d = init_as<D>(self);
             for (const std::string& k : d.keys()) out.append(py::make_tuple(k, module_object(d[k])));
             return out;
           })
      .def(
          "pop",
          [get](py::handle self, py::handle key) {
            py::object m = get(self, key);
            init_as<D>(self).pop(key.cast<std::string>());
            return m;
          },
          py::arg("key"))
      .def("clear", [](py::handle self) { init_as<D>(self).clear(); })
      .def(
          "update", [](py::handle self, py::handle modules) { dict_update(init_as<D>(self), modules); },
          py::arg("modules"));
}

/// A ParameterList element: a Tensor (a Parameter keeps its requires_grad; a plain tensor becomes
/// one that requires grad, as PyTorch's ParameterList wraps it).
std::pair<Tensor, bool> list_parameter(py::handle v, const char* what) {
  if (!py::isinstance<Tensor>(v))
    throw BindingTypeError(
        msg("ParameterList.", what, ": expected a strata.nn.Parameter or Tensor, got ", type_name(v)));
  Tensor t = v.cast<Tensor>();
  return {t, is_parameter(v) ? t.requires_grad() : true};
}

void bind_parameter_list(py::module_& nnm) {
  using L = nn::ParameterList;
  auto fill = [](L* l, py::handle values) {
    if (values.is_none()) return l;
    if (!py::isinstance<py::iterable>(values) || py::isinstance<Tensor>(values))
      throw BindingTypeError(msg("ParameterList: expected an iterable of parameters, got ", type_name(values)));
    for (py::handle v : values) {
      auto [t, rg] = list_parameter(v, "__init__");
      l->append(t, rg);
    }
    return l;
  };
  py::class_<L, PyModuleT<L>, Module, py::smart_holder> pl(
      nnm, "ParameterList", "Holds parameters in a list (torch.nn.ParameterList); it has no forward.");
  pl.def(py::init([fill](py::handle values) { return fill(new L(), values); },
                  [fill](py::handle values) { return fill(new PyModuleT<L>(), values); }),
         py::arg("values") = py::none());
  auto index = [](const L& l, py::handle i) {
    const auto n = static_cast<int64_t>(l.size());
    const int64_t k = int_from_py(i, "ParameterList", "index");
    if (k < -n || k >= n) throw BindingIndexError(msg("index ", k, " is out of range for ParameterList of length ", n));
    return k;
  };
  pl.def("__len__", [](py::handle self) { return init_as<L>(self).size(); })
      .def("__getitem__",
           [index](py::handle self, py::handle i) {
             L& l = init_as<L>(self);
             return parameter_object(l[index(l, i)]);
           })
      .def("__setitem__",
           [index](py::handle self, py::handle i, py::handle v) {
             L& l = init_as<L>(self);
             auto [t, rg] = list_parameter(v, "__setitem__");
             l.set(index(l, i), t, rg);
           })
      .def("__iter__",
           [](py::handle self) {
             L& l = init_as<L>(self);
             py::list out;
             for (std::size_t i = 0; i < l.size(); ++i) out.append(parameter_object(l[static_cast<int64_t>(i)]));
             return py::iter(out);
           })
      .def(
          "append",
          [](py::object self, py::handle v) {
            auto [t, rg] = list_parameter(v, "append");
            init_as<L>(self).append(t, rg);
            return self;
          },
          py::arg("value"))
      .def(
          "extend",
          [](py::object self, py::iterable values) {
            for (py::handle v : values) {
              auto [t, rg] = list_parameter(v, "extend");
              init_as<L>(self).append(t, rg);
            }
            return self;
          },
          py::arg("values"));
}

/// PyTorch raises ValueError for these constructor arguments.
void check_conv_module_args(const char* type, int64_t in_channels, int64_t out_channels, int64_t groups) {
  if (groups <= 0) throw BindingValueError(msg(type, ": groups must be a positive integer, got ", groups));
  if (in_channels % groups != 0) throw BindingValueError(msg(type, ": in_channels must be divisible by groups"));
  if (out_channels % groups != 0) throw BindingValueError(msg(type, ": out_channels must be divisible by groups"));
}

nn::Padding1d padding1d_arg(py::handle h, int64_t stride) {
  if (!py::isinstance<py::str>(h)) return nn::Padding1d(n_ints_1d(h));
  const std::string mode = h.cast<std::string>();
  if (mode != "same" && mode != "valid")
    throw BindingValueError(msg("Invalid padding string '", mode, "', should be one of {'valid', 'same'}"));
  if (mode == "same" && stride != 1)
    throw BindingValueError("padding='same' is not supported for strided convolutions");
  return nn::Padding1d(mode);
}

void bind_conv_norm_extra(py::module_& nnm) {
  Layer<nn::Conv1d>(nnm, "Conv1d", "1-D convolution (torch.nn.Conv1d).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::Conv1d,
               (int64_t in_channels, int64_t out_channels, py::handle kernel_size, py::handle stride,
                py::handle padding, py::handle dilation, int64_t groups, bool bias, const std::string& padding_mode),
               check_conv_module_args("Conv1d", in_channels, out_channels, groups);
               if (padding_mode != "zeros" && padding_mode != "reflect" && padding_mode != "replicate" &&
                   padding_mode != "circular") throw BindingValueError(msg("padding_mode must be one of {'circular', "
                                                                           "'reflect', 'zeros', 'replicate'}, but got "
                                                                           "padding_mode='",
                                                                           padding_mode, "'")),
               (in_channels, out_channels, n_ints_1d(kernel_size), n_ints_1d(stride),
                padding1d_arg(padding, n_ints_1d(stride)), n_ints_1d(dilation), groups, bias, padding_mode)),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("padding_mode") = "zeros")
      .def_property_readonly("in_channels", &nn::Conv1d::in_channels)
      .def_property_readonly("out_channels", &nn::Conv1d::out_channels);

  Layer<nn::ConvTranspose2d>(nnm, "ConvTranspose2d", "2-D transposed convolution (torch.nn.ConvTranspose2d).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::ConvTranspose2d,
               (int64_t in_channels, int64_t out_channels, py::handle kernel_size, py::handle stride,
                py::handle padding, py::handle output_padding, int64_t groups, bool bias, py::handle dilation,
                const std::string& padding_mode),
               check_conv_module_args("ConvTranspose2d", in_channels, out_channels, groups);
               if (padding_mode != "zeros") throw BindingValueError(
                   msg("Only \"zeros\" padding mode is supported for ConvTranspose2d, got '", padding_mode, "'")),
               (in_channels, out_channels, size2_arg(kernel_size, "ConvTranspose2d", "kernel_size"),
                size2_arg(stride, "ConvTranspose2d", "stride"), size2_arg(padding, "ConvTranspose2d", "padding"),
                size2_arg(output_padding, "ConvTranspose2d", "output_padding"), groups, bias,
                size2_arg(dilation, "ConvTranspose2d", "dilation"), padding_mode)),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1,
           py::arg("padding") = 0, py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true,
           py::arg("dilation") = 1, py::arg("padding_mode") = "zeros")
      .def_property_readonly("in_channels", &nn::ConvTranspose2d::in_channels)
      .def_property_readonly("out_channels", &nn::ConvTranspose2d::out_channels);

  Layer<nn::GroupNorm>(nnm, "GroupNorm", "Group normalization (torch.nn.GroupNorm).")
      .def(STRATA_MODULE_INIT_CHECKED(
               nn::GroupNorm, (int64_t num_groups, int64_t num_channels, double eps, bool affine, bool bias),
               if (num_groups <= 0 || num_channels % num_groups != 0) throw BindingValueError(
                   msg("num_channels (", num_channels, ") must be divisible by num_groups (", num_groups, ")")),
               (num_groups, num_channels, eps, affine, bias)),
           py::arg("num_groups"), py::arg("num_channels"), py::arg("eps") = 1e-5, py::arg("affine") = true,
           py::kw_only(), py::arg("bias") = true)
      .def_property_readonly("num_groups", &nn::GroupNorm::num_groups)
      .def_property_readonly("num_channels", &nn::GroupNorm::num_channels);

  bind_module_dict(nnm);
  bind_parameter_list(nnm);
}
}  // namespace strata::python::nn_support
