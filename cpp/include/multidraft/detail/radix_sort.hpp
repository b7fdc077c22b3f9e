// Stable sorting by 64-bit unsigned keys (least-significant-digit radix sort), for the orders the
// plans build on every call: tokens by decreasing q/p (the ratio order) and by increasing q (the
// truncation sets). Comparison sorts whose comparator reads doubles at random cost a sizeable share
// of a plan; a radix pass reads the keys in order (docs/benchmarks/core-internals.md, "Radix
// sort"). Non-negative doubles (+inf included) compare as their bit patterns do, so
// `increasing_key` / `decreasing_key` turn them into keys exactly, ties and all.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

namespace multidraft {

// Key whose increasing order is the increasing order of x >= 0 (NaN excluded by the caller).
inline std::uint64_t increasing_key(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}
inline std::uint64_t decreasing_key(double x) { return ~increasing_key(x); }

// The per-thread buffers of positions_by_key: the plans sort on every call, up to a vocabulary
// each, and reuse them. Every call resizes them and writes every entry it reads; a key function
// never sorts.
struct RadixSortWorkspace {
  struct Item {
    std::uint32_t lead;  // (key - smallest key) >> shift
    int position;
  };
  std::vector<std::uint64_t> keys;
  std::vector<Item> items, buffer;
  std::vector<int> histogram;
  static RadixSortWorkspace& of_this_thread() {
    thread_local RadixSortWorkspace workspace;
    return workspace;
  }
};

// Positions 0 .. count-1 sorted by increasing key(position), ties in increasing position
// (stable), written to `positions`. Small inputs use a comparison sort (the radix passes'
// histograms cost more there). Larger ones are radix sorted by a lead: the key's offset from the
// smallest key, its bits from the range's leading one down, 32 of them or one digit fewer when
// that keeps the keys' doubles 18 bits of mantissa in every binade the range spans (8-byte
// entries; token ids fit whole), then an insertion pass orders the entries the lead left tied by
// their full keys, rarely more than a neighbour apart; when it would move entries far, a
// comparison sort finishes instead. Digits are bytes, or 11 bits from kWideDigits entries on (the
// 2048 buckets cost more than they save on a top-k draft's ~1000 entries): a full vocabulary's
// 32000 ratios, whose exponents differ by a few, take two scatter passes (their 32 leading varying
// bits took three). The histograms of every digit are counted in the pass that reads the leads.
// The buffers are RadixSortWorkspace's. One body, not split into steps: the key range, `shift`
// and `before` are shared by the radix passes and the insertion pass that follows them.
template <class Key>
void positions_by_key(int count, Key key, std::vector<int>& positions) {
  using Item = RadixSortWorkspace::Item;
  RadixSortWorkspace& workspace = RadixSortWorkspace::of_this_thread();
  std::vector<std::uint64_t>& keys = workspace.keys;
  std::vector<Item>& items = workspace.items;
  keys.resize(count);
  items.resize(count);
  std::uint64_t smallest = ~std::uint64_t{0}, largest = 0;
  for (int j = 0; j < count; ++j) {
    keys[j] = key(j);
    smallest = std::min(smallest, keys[j]);
    largest = std::max(largest, keys[j]);
  }
  auto before = [&](const Item& a, const Item& b) {
    return keys[a.position] < keys[b.position] || (keys[a.position] == keys[b.position] && a.position < b.position);
  };
  constexpr int kSmall = 128, kWideDigits = 8192;
  int shift = 0;  // the lead drops the key's offset's lowest `shift` bits
  auto radix = [&](auto digit_bits) {
    constexpr int kBits = decltype(digit_bits)::value, kBuckets = 1 << kBits, kPasses = (32 + kBits - 1) / kBits;
    // The lead is one digit short of 32 bits when a binade (2^52 key units of a double) still
    // spans 2^18 leads or more (a range below 2^(lead + 34)), else 32 bits (2^20 leads or more).
    constexpr int kShortLead = kBits * (kPasses - 1);
    const std::uint64_t range = largest - smallest;
    const int lead_bits = (range >> (kShortLead + 34)) == 0 ? kShortLead : 32;
    while ((range >> shift) >= (std::uint64_t{1} << lead_bits)) ++shift;
    std::vector<int>& histogram = workspace.histogram;
    histogram.assign(kPasses * kBuckets, 0);
    std::uint32_t lead_varying = 0;  // the lead bits some entry has (the smallest key's lead is 0)
    for (int j = 0; j < count; ++j) {
      const std::uint32_t lead = static_cast<std::uint32_t>((keys[j] - smallest) >> shift);
      items[j] = {lead, j};
      lead_varying |= lead;
      for (int pass = 0; pass < kPasses; ++pass) ++histogram[pass * kBuckets + ((lead >> (pass * kBits)) & (kBuckets - 1))];
    }
    std::vector<Item>& buffer = workspace.buffer;
    buffer.resize(count);
    for (int pass = 0; pass < kPasses; ++pass) {  // least significant digit first: stable passes
      const int digit_shift = pass * kBits;
      if (!((lead_varying >> digit_shift) & (kBuckets - 1))) continue;  // a digit every lead shares
      int* start = histogram.data() + pass * kBuckets;
      std::exclusive_scan(start, start + kBuckets, start, 0);
      for (const Item& item : items) buffer[start[(item.lead >> digit_shift) & (kBuckets - 1)]++] = item;
      items.swap(buffer);
    }
  };
  if (count <= kSmall) {
    for (int j = 0; j < count; ++j) items[j] = {0, j};
    std::sort(items.begin(), items.end(), before);
  } else {
    if (count >= kWideDigits)
      radix(std::integral_constant<int, 11>());
    else
      radix(std::integral_constant<int, 8>());
    long moves = 0;
    for (int i = 1; shift > 0 && i < count && moves <= 8L * count; ++i) {
      const Item current = items[i];
      if (current.lead != items[i - 1].lead) continue;  // ordered by its lead: no full key to read
      int j = i;
      for (; j > 0 && items[j - 1].lead == current.lead && before(current, items[j - 1]); --j, ++moves)
        items[j] = items[j - 1];
      items[j] = current;
    }
    if (moves > 8L * count) std::sort(items.begin(), items.end(), before);  // many ties in the lead
  }
  positions.resize(count);
  for (int j = 0; j < count; ++j) positions[j] = items[j].position;
}

template <class Key>
std::vector<int> positions_by_key(int count, Key key) {
  std::vector<int> positions;
  positions_by_key(count, key, positions);
  return positions;
}

}  // namespace multidraft
