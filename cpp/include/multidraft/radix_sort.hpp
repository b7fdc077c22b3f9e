// Stable sorting by 64-bit unsigned keys (least-significant-digit radix sort), for the orders the
// plans build on every call: tokens by decreasing q/p or q, variables by e^a, tokens by id.
// Comparison sorts of ~1000 entries whose comparator reads doubles at random cost tens of
// microseconds (a third of a flat (1000, 2) Global Resolution plan); a radix pass reads the keys
// in order. Non-negative doubles (+inf included) compare as their bit patterns do, so
// `increasing_key` / `decreasing_key` turn them into keys exactly, ties and all.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

namespace multidraft {

// Key whose increasing order is the increasing order of x >= 0 (NaN excluded by the caller).
inline std::uint64_t increasing_key(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline std::uint64_t decreasing_key(double x) { return ~increasing_key(x); }

// Positions 0 .. count-1 sorted by increasing key(position), ties in increasing position
// (stable). Small inputs use a comparison sort (the radix passes' histograms cost more there).
// Only the key bytes that differ between the entries get a pass (token ids: two of eight), and
// of those only the four most significant at first (doubles: the exponent and ~20 bits of
// mantissa): an insertion pass then orders the entries those bytes left tied, rarely more than
// a neighbour apart; when it would move entries far, the remaining passes run instead. The
// buffers are a per-thread workspace: the plans sort on every call, a few thousand entries each.
template <class Key>
std::vector<int> positions_by_key(int count, Key key) {
  struct Item {
    std::uint64_t key;
    int position;
  };
  constexpr int kBits = 8, kBuckets = 1 << kBits, kPasses = (64 + kBits - 1) / kBits, kLeadingPasses = 4;
  struct Workspace {
    std::vector<Item> items, buffer;
    std::vector<std::array<int, kBuckets>> histogram;
  };
  thread_local Workspace workspace;
  std::vector<Item>& items = workspace.items;
  items.resize(count);
  std::uint64_t varying = 0;  // the bits in which some key differs from the first
  for (int j = 0; j < count; ++j) {
    items[j] = {key(j), j};
    varying |= items[j].key ^ items[0].key;
  }
  auto before = [](const Item& a, const Item& b) { return a.key < b.key || (a.key == b.key && a.position < b.position); };
  constexpr int kSmall = 128;
  if (count <= kSmall) {
    std::sort(items.begin(), items.end(), before);
  } else {
    int shifts[kPasses], passes = 0;
    for (int pass = 0; pass < kPasses; ++pass)
      if ((varying >> (pass * kBits)) & (kBuckets - 1)) shifts[passes++] = pass * kBits;
    // LSD passes over shifts[first, passes): the entries end sorted by those bytes, stably
    auto radix = [&](int first) {
      std::vector<std::array<int, kBuckets>>& histogram = workspace.histogram;
      histogram.resize(passes - first);
      for (auto& h : histogram) h.fill(0);
      for (const Item& item : items)
        for (int pass = first; pass < passes; ++pass) ++histogram[pass - first][(item.key >> shifts[pass]) & (kBuckets - 1)];
      std::vector<Item>& buffer = workspace.buffer;
      buffer.resize(count);
      for (int pass = first; pass < passes; ++pass) {
        std::array<int, kBuckets>& start = histogram[pass - first];
        const int shift = shifts[pass];
        std::exclusive_scan(start.begin(), start.end(), start.begin(), 0);
        for (const Item& item : items) buffer[start[(item.key >> shift) & (kBuckets - 1)]++] = item;
        items.swap(buffer);
      }
    };
    const int first = std::max(passes - kLeadingPasses, 0);
    radix(first);
    if (first > 0) {
      long moves = 0;
      for (int i = 1; i < count && moves <= 8L * count; ++i) {
        const Item current = items[i];
        int j = i;
        for (; j > 0 && before(current, items[j - 1]); --j, ++moves) items[j] = items[j - 1];
        items[j] = current;
      }
      if (moves > 8L * count) {  // many ties in the leading bytes: sort by every byte
        for (int j = 0; j < count; ++j) items[j] = {key(j), j};
        radix(0);
      }
    }
  }
  std::vector<int> positions(count);
  for (int j = 0; j < count; ++j) positions[j] = items[j].position;
  return positions;
}

// Sorts `items` stably by increasing key(item).
template <class T, class Key>
void sort_by_key(std::vector<T>& items, Key key) {
  const std::vector<int> positions = positions_by_key(static_cast<int>(items.size()), [&](int j) { return key(items[j]); });
  std::vector<T> sorted;
  sorted.reserve(items.size());
  for (int j : positions) sorted.push_back(items[j]);
  items.swap(sorted);
}

}  // namespace multidraft
