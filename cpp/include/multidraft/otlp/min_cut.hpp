// Reading a minimum cut off a finished LEMON max-flow: the nodes reachable in the residual graph.
// Own search rather than LEMON's cut map, whose orientation is not relied on (the cut of [GR]
// Appendix D is read as: source side = H), and with an explicit tolerance, so that the flow's
// round-off cannot make a saturated arc look unsaturated. A residual arc x -> y exists when the arc
// x -> y has spare capacity or the arc y -> x carries flow.
#pragma once
#include <deque>
#include <vector>

#include <lemon/core.h>

namespace multidraft {

enum class CutSide {
  source,  // the nodes reachable from the source: the source side of the minimum cut with the smallest source side
  sink     // the nodes that reach the sink: the sink side of the minimum cut with the largest source side
};

// Per node id of `graph`: 1 if the node lies on `side` (reached from `start`, the source or the
// sink of the flow). `capacity` and `flow` are the network's arc maps (flow: anything with
// flow(arc), e.g. lemon::Preflow). An arc counts as saturated within `tolerance`.
template <class Graph, class Capacity, class Flow>
std::vector<char> cut_side(const Graph& graph, const Capacity& capacity, const Flow& flow, typename Graph::Node start,
                           CutSide side, double tolerance) {
  using Node = typename Graph::Node;
  using Arc = typename Graph::Arc;
  auto spare = [&](Arc a) { return capacity[a] - flow.flow(a) > tolerance; };
  auto carries = [&](Arc a) { return flow.flow(a) > tolerance; };
  std::vector<char> reached(graph.maxNodeId() + 1, 0);
  std::deque<Node> queue{start};
  reached[graph.id(start)] = 1;
  auto visit = [&](Node y) {
    if (!reached[graph.id(y)]) {
      reached[graph.id(y)] = 1;
      queue.push_back(y);
    }
  };
  while (!queue.empty()) {
    const Node x = queue.front();
    queue.pop_front();
    // Forward: residual arcs leaving x. Backward: residual arcs entering x (their tails reach x).
    for (typename Graph::OutArcIt a(graph, x); a != lemon::INVALID; ++a)
      if (side == CutSide::source ? spare(a) : carries(a)) visit(graph.target(a));
    for (typename Graph::InArcIt a(graph, x); a != lemon::INVALID; ++a)
      if (side == CutSide::source ? carries(a) : spare(a)) visit(graph.source(a));
  }
  return reached;
}

}  // namespace multidraft
