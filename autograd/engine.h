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

#include "autograd/node.h"

namespace strata::autograd {

/// Accumulates d(roots)/d(leaf) · grad_roots into every leaf's `.grad`. `grad_roots` may be empty
/// when every root has one element (the gradient is then 1); otherwise one per root, same shape.
void backward(const TensorList& roots, const TensorList& grad_roots = {}, bool retain_graph = false);

/// Returns d(outputs)/d(inputs) · grad_outputs for each input, without touching any `.grad`.
/// An input the outputs do not depend on gets an undefined tensor when `allow_unused`, otherwise
/// an error.
TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs = {},
                bool retain_graph = false, bool allow_unused = false);

}  // namespace strata::autograd
