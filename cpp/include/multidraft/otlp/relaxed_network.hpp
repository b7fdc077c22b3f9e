// The relaxed OTLP as a bipartite max-flow ([GR] Section 5.2, Lemma F.1):
//   s -> i (capacity: row target of token i),  i -> r (unbounded) for every token i of right node r,
//   r -> t (capacity: draft mass of r).
// A right node is a draft tuple (the paper's network) or, exactly equivalently, a set of tuples
// with the same distinct tokens ("set compression", ours: such tuples have the same neighbours, so
// a flow through their merged node splits back in proportion to their masses), which shrinks V^n
// nodes to sum_{j<=n} C(k, j). Solved by LEMON's Preflow on doubles with an explicit tolerance.
#pragma once
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <lemon/preflow.h>
#include <lemon/smart_graph.h>
#include <lemon/tolerance.h>

#include "multidraft/otlp/min_cut.hpp"

namespace multidraft {

// Largest network the core will build (arcs of all kinds); about 1.5 GB of LEMON graph at most.
constexpr double kMaxNetworkArcs = 2.0e7;

// Capacities below this are treated as zero by Preflow. Draft masses of single tuples can be far
// below LEMON's default 1e-10; dropping masses of 1e-18 costs at most 1e-18 per node.
constexpr double kFlowTolerance = 1e-18;

// Residual capacity below this counts as saturated when reading the minimum cut: the flow's
// round-off must not make a token look unsaturated. Matches the 1e-13 snap of the i.i.d. scan
// (docs/design/certified-bounds.md, "Subset selection round-off"): a minimiser found this way is
// optimal within about 1e-13 in psi.
constexpr double kCutTolerance = 1e-13;

// Right nodes in CSR form: node r holds the distinct tokens members[offsets[r] .. offsets[r+1]).
struct RightNodes {
  std::vector<std::int64_t> offsets{0};
  std::vector<int> members;
  std::vector<double> capacity;

  std::size_t size() const { return capacity.size(); }
  void add(const int* tokens, int count, double mass) {
    members.insert(members.end(), tokens, tokens + count);
    offsets.push_back(static_cast<std::int64_t>(members.size()));
    capacity.push_back(mass);
  }
};

inline void check_network_size(double left, double right, double member_arcs, const char* what) {
  const double arcs = left + right + member_arcs;
  if (arcs > kMaxNetworkArcs) {
    char message[400];
    std::snprintf(message, sizeof message,
                  "request too large: %s would need about %.3g arcs, more than MAX_NETWORK_ARCS = %.3g; "
                  "reduce the draft support of 'q' (top-k) or 'n'",
                  what, arcs, kMaxNetworkArcs);
    throw std::invalid_argument(message);
  }
}

struct RelaxedFlow {
  double value = 0.0;
  std::vector<double> member_flow;  // aligned with RightNodes::members: flow token -> node
  std::vector<double> row_flow;     // per token, length V
  std::vector<double> column_flow;  // per right node
  std::vector<char> reaches_sink;   // per token: can reach t in the residual graph
};

// Max flow with row capacities `row_capacity` (length V). `reaches_sink` marks the tokens on the
// sink side of the minimum cut with the largest source side; for row capacities p these are the
// smallest minimiser H* of psi ([GR] Eq. 35-36: y_i = 1 on the sink side).
inline RelaxedFlow max_relaxed_flow(const double* row_capacity, int V, const RightNodes& right) {
  using Graph = lemon::SmartDigraph;
  Graph graph;
  const std::size_t R = right.size();
  // Only tokens that belong to some right node take part in the flow; the others (a large
  // vocabulary outside the draft's top-k) would only add idle nodes.
  std::vector<int> used_tokens;
  std::vector<char> used(V, 0);
  for (int i : right.members)
    if (!used[i]) {
      used[i] = 1;
      used_tokens.push_back(i);
    }
  graph.reserveNode(static_cast<int>(used_tokens.size() + R + 2));
  graph.reserveArc(static_cast<int>(used_tokens.size() + R + right.members.size()));
  const Graph::Node source = graph.addNode(), sink = graph.addNode();
  std::vector<Graph::Node> token_node(V), set_node(R);
  for (int i : used_tokens) token_node[i] = graph.addNode();
  for (std::size_t r = 0; r < R; ++r) set_node[r] = graph.addNode();

  Graph::ArcMap<double> capacity(graph);
  std::vector<Graph::Arc> column_arc(R), member_arc(right.members.size());
  for (int i : used_tokens) capacity[graph.addArc(source, token_node[i])] = row_capacity[i];
  const double unbounded = 2.0;  // total flow <= 1, so any capacity >= 1 is infinite
  for (std::size_t r = 0; r < R; ++r) {
    column_arc[r] = graph.addArc(set_node[r], sink);
    capacity[column_arc[r]] = right.capacity[r];
    for (std::int64_t k = right.offsets[r]; k < right.offsets[r + 1]; ++k) {
      member_arc[k] = graph.addArc(token_node[right.members[k]], set_node[r]);
      capacity[member_arc[k]] = unbounded;
    }
  }

  lemon::Preflow<Graph, Graph::ArcMap<double>> preflow(graph, capacity, source, sink);
  preflow.tolerance(lemon::Tolerance<double>(kFlowTolerance));
  preflow.run();

  RelaxedFlow result;
  result.value = preflow.flowValue();
  result.member_flow.resize(right.members.size());
  result.row_flow.assign(V, 0.0);
  result.column_flow.assign(R, 0.0);
  for (std::size_t r = 0; r < R; ++r)
    for (std::int64_t k = right.offsets[r]; k < right.offsets[r + 1]; ++k) {
      const double f = std::max(0.0, preflow.flow(member_arc[k]));
      result.member_flow[k] = f;
      result.row_flow[right.members[k]] += f;
      result.column_flow[r] += f;
    }

  const std::vector<char> reaches = cut_side(graph, capacity, preflow, sink, CutSide::sink, kCutTolerance);
  result.reaches_sink.assign(V, 0);
  for (int i : used_tokens) result.reaches_sink[i] = reaches[graph.id(token_node[i])];
  return result;
}

}  // namespace multidraft
