// Stable sorting by 64-bit unsigned keys (least-significant-digit radix sort), for the orders the
// plans build on every call: tokens by decreasing q/p (the ratio order) and by increasing q (the
// truncation sets).
// Comparison sorts of ~1000 entries whose comparator reads doubles at random cost tens of
// microseconds (a third of a flat (1000, 2) Global Resolution plan); a radix pass reads the keys
// in order. Non-negative doubles (+inf included) compare as their bit patterns do, so
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

// Positions 0 .. count-1 sorted by increasing key(position), ties in increasing position
// (stable), written to `positions`. Small inputs use a comparison sort (the radix passes'
// histograms cost more there). Larger ones are radix sorted by their 32 leading varying key bits
// (8-byte entries, a pass per digit that varies: token ids take two; doubles keep the exponent and
// ~20 bits of mantissa), then an insertion pass orders the entries those bits left tied by their
// full keys, rarely more than a neighbour apart; when it would move entries far, a comparison sort
// finishes instead. Digits are bytes, or 11 bits from kWideDigits entries on (three scatter passes
// instead of four: a full vocabulary's 32000 ratios sort ~15% faster; the 2048 buckets cost more
// than they save on a top-k draft's ~1000 entries). The histograms of every digit are counted in
// the pass that reads the keys (and again only when the keys vary in fewer than 57 bits). The
// buffers are a per-thread workspace: the plans sort on every call, up to a vocabulary each.
template <class Key>
void positions_by_key(int count, Key key, std::vector<int>& positions) {
  struct Item {
    std::uint32_t lead;  // the leading varying bits of the key
    int position;
  };
  struct Workspace {
    std::vector<std::uint64_t> keys;
    std::vector<Item> items, buffer;
    std::vector<int> histogram;
  };
  thread_local Workspace workspace;
  std::vector<std::uint64_t>& keys = workspace.keys;
  std::vector<Item>& items = workspace.items;
  keys.resize(count);
  items.resize(count);
  std::uint64_t varying = 0;  // the bits in which some key differs from the first
  int shift = 0;              // the lead is key >> shift
  auto lead_shift = [&] {
    int at = 0;
    while (at < 32 && (varying >> at) >= (std::uint64_t{1} << 32)) at += 8;
    return at;
  };
  auto before = [&](const Item& a, const Item& b) {
    return keys[a.position] < keys[b.position] || (keys[a.position] == keys[b.position] && a.position < b.position);
  };
  constexpr int kSmall = 128, kWideDigits = 8192, kUsualShift = 32;
  auto radix = [&](auto digit_bits) {
    constexpr int kBits = decltype(digit_bits)::value, kBuckets = 1 << kBits, kPasses = (32 + kBits - 1) / kBits;
    std::vector<int>& histogram = workspace.histogram;
    auto count_leads = [&](int j) {
      const std::uint32_t lead = static_cast<std::uint32_t>(keys[j] >> shift);
      items[j] = {lead, j};
      for (int pass = 0; pass < kPasses; ++pass) ++histogram[pass * kBuckets + ((lead >> (pass * kBits)) & (kBuckets - 1))];
    };
    // One pass reads the keys and counts their leads at the usual shift (doubles of different
    // exponents vary above bit 56); keys varying less are counted again at their own shift.
    histogram.assign(kPasses * kBuckets, 0);
    shift = kUsualShift;
    for (int j = 0; j < count; ++j) {
      keys[j] = key(j);
      varying |= keys[j] ^ keys[0];
      count_leads(j);
    }
    if (lead_shift() != kUsualShift) {
      shift = lead_shift();
      histogram.assign(kPasses * kBuckets, 0);
      for (int j = 0; j < count; ++j) count_leads(j);
    }
    const std::uint64_t lead_varying = varying >> shift;
    std::vector<Item>& buffer = workspace.buffer;
    buffer.resize(count);
    for (int pass = 0; pass < kPasses; ++pass) {  // least significant digit first: stable passes
      const int digit_shift = pass * kBits;
      if (!((lead_varying >> digit_shift) & (kBuckets - 1))) continue;  // a digit every key shares
      int* start = histogram.data() + pass * kBuckets;
      std::exclusive_scan(start, start + kBuckets, start, 0);
      for (const Item& item : items) buffer[start[(item.lead >> digit_shift) & (kBuckets - 1)]++] = item;
      items.swap(buffer);
    }
  };
  if (count <= kSmall) {
    for (int j = 0; j < count; ++j) {
      keys[j] = key(j);
      varying |= keys[j] ^ keys[0];
    }
    shift = lead_shift();
    for (int j = 0; j < count; ++j) items[j] = {static_cast<std::uint32_t>(keys[j] >> shift), j};
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
    if (moves > 8L * count) std::sort(items.begin(), items.end(), before);  // many ties in the leading bits
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
