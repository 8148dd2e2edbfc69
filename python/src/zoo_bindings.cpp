// strata._C.models: the model zoo (models/zoo/*.h) as nn.Module classes. python/strata/models
// wraps them in torchvision-style constructors (resnet18(), vgg16(), densenet121(), ...).

#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"
#include "models/zoo/densenet.h"
#include "models/zoo/dlrm.h"
#include "models/zoo/gpt.h"
#include "models/zoo/mlp.h"
#include "models/zoo/resnet.h"
#include "models/zoo/vgg.h"

namespace strata::python {

namespace {

using namespace strata::nn::zoo;
using nn::Module;

template <class T, class Base = Module>
using Model = py::class_<T, Base, py::smart_holder>;

std::vector<int64_t> widths_arg(py::handle h, const char* op, const char* name) {
  if (py::isinstance<py::str>(h)) return parse_arch(h.cast<std::string>(), std::string(op) + ": " + name);
  const Dims d = int_list_from_sequence(h, op, name);
  return std::vector<int64_t>(d.begin(), d.end());
}

std::vector<Tensor> tensors_arg(py::handle h, const char* op, const char* name) {
  if (py::isinstance<Tensor>(h) || !PySequence_Check(h.ptr()) || py::isinstance<py::str>(h))
    throw BindingTypeError(
        msg(op, ": ", name, " must be a list of tensors (one per table), got ", Py_TYPE(h.ptr())->tp_name));
  std::vector<Tensor> out;
  for (py::handle item : py::reinterpret_borrow<py::sequence>(h)) {
    if (!py::isinstance<Tensor>(item))
      throw BindingTypeError(msg(op, ": ", name, " must hold strata Tensors, got a ", Py_TYPE(item.ptr())->tp_name));
    out.push_back(item.cast<Tensor>());
  }
  return out;
}

}  // namespace

namespace {

// MLP and VGG, and their configurations.
void def_mlp_vgg(py::module_& zm) {
  Model<MLP, nn::Sequential>(zm, "MLP", "Linear layers with an activation between them (a Sequential).")
      .def(py::init([](py::handle widths, const std::string& activation, std::optional<std::string> last_activation) {
             return std::make_shared<MLP>(widths_arg(widths, "MLP", "widths"), activation,
                                          last_activation.value_or(""));
           }),
           py::arg("widths"), py::arg("activation") = "relu", py::arg("last_activation") = py::none())
      .def_property_readonly("widths", &MLP::widths);

  Model<VGG>(zm, "VGG", "VGG (torchvision's structure and names).")
      .def(py::init([](py::handle config, bool batch_norm, int64_t num_classes, int64_t in_channels, int64_t pool_size,
                       int64_t hidden, double dropout) {
             VGGOptions o;
             o.config = widths_arg(config, "VGG", "config");
             o.batch_norm = batch_norm;
             o.num_classes = num_classes;
             o.in_channels = in_channels;
             o.pool_size = pool_size;
             o.hidden = hidden;
             o.dropout = dropout;
             if (dropout < 0 || dropout > 1)
               throw BindingValueError(msg("VGG: dropout must lie in [0, 1], got ", dropout));
             return std::make_shared<VGG>(o);
           }),
           py::arg("config"), py::arg("batch_norm") = false, py::arg("num_classes") = 1000, py::arg("in_channels") = 3,
           py::arg("pool_size") = 7, py::arg("hidden") = 4096, py::arg("dropout") = 0.5);
  zm.def("vgg_config", &vgg_config, py::arg("depth"), "torchvision's VGG configuration (0 marks a max pool).");
  zm.def("deep_vgg_config", &deep_vgg_config, py::arg("depth"), "The deep VGG configuration of depth 16 + 5k.");
}

// ResNet and its blocks, and the configurations.
void def_resnet(py::module_& zm) {
  Model<BasicBlock>(zm, "BasicBlock");
  Model<Bottleneck>(zm, "Bottleneck");
  Model<ResNet>(zm, "ResNet", "ResNet (torchvision's structure and names).")
      .def(py::init([](py::handle layers, py::handle widths, bool bottleneck, const std::string& stem,
                       int64_t num_classes, int64_t in_channels) {
             ResNetOptions o;
             o.layers = widths_arg(layers, "ResNet", "layers");
             o.widths = widths_arg(widths, "ResNet", "widths");
             o.bottleneck = bottleneck;
             o.stem = stem;
             o.num_classes = num_classes;
             o.in_channels = in_channels;
             return std::make_shared<ResNet>(o);
           }),
           py::arg("layers"), py::arg("widths") = std::vector<int64_t>{64, 128, 256, 512},
           py::arg("bottleneck") = false, py::arg("stem") = "imagenet", py::arg("num_classes") = 1000,
           py::arg("in_channels") = 3);
  zm.def(
      "resnet_config",
      [](int depth) {
        const ResNetOptions o = resnet_options(depth);
        return py::make_tuple(o.layers, o.bottleneck);
      },
      py::arg("depth"), "(layers, bottleneck) of torchvision's ResNet-<depth>.");
  zm.def(
      "cifar_resnet_config",
      [](int depth) {
        const ResNetOptions o = cifar_resnet_options(depth);
        return py::make_tuple(o.layers, o.widths);
      },
      py::arg("depth"), "(layers, widths) of the CIFAR ResNet of depth 6n + 2.");
}

// DenseNet and its parts, and the configurations.
void def_densenet(py::module_& zm) {
  Model<DenseLayer>(zm, "DenseLayer");
  Model<DenseBlock>(zm, "DenseBlock");
  Model<DenseNet>(zm, "DenseNet", "DenseNet-BC (torchvision's structure and names).")
      .def(py::init([](int64_t growth_rate, py::handle block_config, int64_t num_init_features, int64_t bn_size,
                       double drop_rate, int64_t num_classes, int64_t in_channels, const std::string& stem) {
             DenseNetOptions o;
             o.growth_rate = growth_rate;
             o.block_config = widths_arg(block_config, "DenseNet", "block_config");
             o.num_init_features = num_init_features;
             o.bn_size = bn_size;
             o.drop_rate = drop_rate;
             o.num_classes = num_classes;
             o.in_channels = in_channels;
             o.stem = stem;
             return std::make_shared<DenseNet>(o);
           }),
           py::arg("growth_rate") = 32, py::arg("block_config") = std::vector<int64_t>{6, 12, 24, 16},
           py::arg("num_init_features") = 64, py::arg("bn_size") = 4, py::arg("drop_rate") = 0.0,
           py::arg("num_classes") = 1000, py::arg("in_channels") = 3, py::arg("stem") = "imagenet");
  zm.def(
      "densenet_config",
      [](int depth) {
        const DenseNetOptions o = densenet_options(depth);
        return py::make_tuple(o.growth_rate, o.block_config, o.num_init_features);
      },
      py::arg("depth"), "(growth_rate, block_config, num_init_features) of DenseNet-<depth>.");
}

// The dense DLRM (nn::zoo::DLRM).
void def_dlrm(py::module_& zm) {
  Model<DLRM>(zm, "DLRM", "DLRM as in facebookresearch/dlrm (names, structure and initialization).")
      .def(py::init([](int64_t sparse_feature_size, py::handle embedding_sizes, py::handle bottom_mlp,
                       py::handle top_mlp, const std::string& interaction, bool interaction_itself) {
             DLRMOptions o;
             o.sparse_feature_size = sparse_feature_size;
             o.embedding_sizes = widths_arg(embedding_sizes, "DLRM", "embedding_sizes");
             o.bottom_mlp = widths_arg(bottom_mlp, "DLRM", "bottom_mlp");
             o.top_mlp = widths_arg(top_mlp, "DLRM", "top_mlp");
             o.interaction = interaction;
             o.interaction_itself = interaction_itself;
             return std::make_shared<DLRM>(o);
           }),
           py::arg("sparse_feature_size"), py::arg("embedding_sizes"), py::arg("bottom_mlp"), py::arg("top_mlp"),
           py::arg("interaction") = "dot", py::arg("interaction_itself") = false)
      .def(
          "forward",
          [](DLRM& d, const Tensor& dense, py::handle indices, py::handle offsets, py::handle per_sample_weights) {
            const auto idx = tensors_arg(indices, "DLRM.forward", "indices");
            const auto off = tensors_arg(offsets, "DLRM.forward", "offsets");
            const auto psw = per_sample_weights.is_none()
                                 ? std::vector<Tensor>{}
                                 : tensors_arg(per_sample_weights, "DLRM.forward", "per_sample_weights");
            py::gil_scoped_release release;
            return d.forward(dense, idx, off, psw);
          },
          py::arg("dense"), py::arg("indices"), py::arg("offsets"), py::arg("per_sample_weights") = py::none())
      .def(
          "interact",
          [](const DLRM& d, const Tensor& x, py::handle embedded) {
            const auto e = tensors_arg(embedded, "DLRM.interact", "embedded");
            py::gil_scoped_release release;
            return d.interact(x, e);
          },
          py::arg("x"), py::arg("embedded"))
      .def_property_readonly("interaction_width", &DLRM::interaction_width);
}

// The GPT decoder.
void def_gpt(py::module_& zm) {
  Model<GPT>(zm, "GPT", "A GPT-2-style decoder (see models/zoo/gpt.h).")
      .def(py::init([](int64_t vocab_size, int64_t block_size, int64_t n_layer, int64_t n_head, int64_t n_embd,
                       double dropout, bool bias, int64_t ffn_chunks) {
             return std::make_shared<GPT>(
                 GPTConfig{vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias, ffn_chunks});
           }),
           py::arg("vocab_size") = 50304, py::arg("block_size") = 1024, py::arg("n_layer") = 12, py::arg("n_head") = 12,
           py::arg("n_embd") = 768, py::arg("dropout") = 0.0, py::arg("bias") = true, py::arg("ffn_chunks") = 1)
      .def(
          "forward",
          [](GPT& g, const Tensor& idx, std::optional<Tensor> targets) -> py::object {
            if (!targets) {
              py::gil_scoped_release release;
              return py::cast(g.forward(idx));
            }
            Tensor loss;
            {
              py::gil_scoped_release release;
              loss = g.loss(idx, *targets);
            }
            return py::cast(loss);
          },
          py::arg("idx"), py::arg("targets") = py::none(),
          "Logits [B, T, vocab] of idx [B, T]; with targets, the mean cross-entropy loss instead.")
      .def_property_readonly(
          "blocks",
          [](GPT& g) { return std::static_pointer_cast<nn::RematSequential>(g.child("transformer")->child("h")); })
      .def_property_readonly("block_size", [](const GPT& g) { return g.config().block_size; })
      .def_property_readonly("vocab_size", [](const GPT& g) { return g.config().vocab_size; });
}

}  // namespace

void init_zoo(py::module_& m) {
  py::module_ zm = m.def_submodule("models", "The model zoo's compiled half (strata.models wraps it).");
  def_mlp_vgg(zm);
  def_resnet(zm);
  def_densenet(zm);
  def_dlrm(zm);
  def_gpt(zm);
}

}  // namespace strata::python
