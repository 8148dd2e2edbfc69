#pragma once
/// @file
/// The backward engine: runs the recorded graph in reverse, driven by dependency counts.
///
/// Note [Engine order]
/// A node runs once every node that sends it a gradient has run (its dependency count reaches
/// zero); among ready nodes an AccumulateGrad runs first (it hands a finished gradient to its leaf
/// and frees the buffer), then the most recently recorded (highest sequence number), so a
/// chain runs in exactly the reverse of its recording order — the order the tape streamer
/// prefetches in. Gradients meeting at one input are summed. Nodes run on the calling thread with
/// grad mode off; the kernels inside them are parallel. After a node ran its saved values are
/// released unless the graph is retained.
///
/// Note [In-place backward]
/// A backward function may write the gradient w.r.t. its input into the buffer of the gradient it
/// received, when nothing else can see that buffer (reusable_gradient: the same test as Note
/// [In-place gradient accumulation]) and the two have one shape and dtype. The pointwise unary ops
/// (relu, sigmoid, tanh, gelu, ...) and batch norm do: their backward then allocates nothing of the
/// input's size (conv2d too, through a one-chunk staging buffer, when its input gradient has the
/// output gradient's shape: Note [Conv input gradient in place] in ops/conv.cpp), so a chain conv →
/// batch norm → relu holds one gradient-sized buffer across its
/// norm and relu backward steps instead of two, which lowers the backward's peak under a fast-tier
/// budget (the Auto planner profiles each step's backward growth, so its model sees the saving).
/// The engine moves gradients from node to node and keeps no copy, so a gradient a node computed
/// is reusable unless grad() captures it at a target, a hook holds it, or two inputs share it
/// (add). Root gradients: backward() and grad() copy the caller's list, so a root gradient the
/// caller passes is never overwritten; grad_consuming() takes the list over, and a root gradient
/// nothing else holds may then be reused. The kernels compute the same values either way (each
/// element reads its own incoming gradient before writing it), so gradients are bitwise the same.

#include "autograd/node.h"

namespace strata::autograd {

/// True when `g` — a gradient a backward function received — may be overwritten with the gradient
/// it computes (Note [In-place backward]): the only handle to its tensor, the only tensor on its
/// storage, contiguous and covering the storage exactly, in bytes Strata allocated. Call it only
/// on the incoming gradients of a backward function, which are the function's to consume.
bool reusable_gradient(const Tensor& g);

/// Accumulates d(roots)/d(leaf) · grad_roots into every leaf's `.grad`. `grad_roots` may be empty
/// when every root has one element (the gradient is then 1); otherwise one per root, same shape.
void backward(const TensorList& roots, const TensorList& grad_roots = {}, bool retain_graph = false);

/// Returns d(outputs)/d(inputs) · grad_outputs for each input, without touching any `.grad`.
/// An input the outputs do not depend on gets an undefined tensor when `allow_unused`, otherwise
/// an error.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool allow_unused = false);

/// grad() that takes `grad_outputs` over: a root gradient nothing else holds may be overwritten by
/// backward steps working in place (Note [In-place backward]). The profiler of the Auto planner
/// uses it, so the backward growth it measures is the one the step has inside a whole backward.
TensorList grad_consuming(const TensorList& outputs, const TensorList& inputs, TensorList grad_outputs,
                          bool retain_graph = false, bool allow_unused = false);

}  // namespace strata::autograd
