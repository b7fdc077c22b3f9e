// Everything the core offers, for a program that embeds it: one include per concept folder.
// docs/design/architecture.md describes the folders and how a call flows through them.
#pragma once

#include "multidraft/core/distribution.hpp"   // probability rows as users pass them
#include "multidraft/core/draft_scheme.hpp"   // how drafts are drawn, with exact tuple laws
#include "multidraft/core/rng.hpp"            // the per-row generator

#include "multidraft/otlp/otlp_plan.hpp"          // exact optimal plans by max-flow ([GR] Eq. 1)
#include "multidraft/otlp/subset_selection.hpp"   // alpha* and H* ([GR] Theorem 3.1)

#include "multidraft/global_resolution/plan.hpp"      // [GR] Algorithm 1
#include "multidraft/global_resolution/verifier.hpp"  // its verifier with the exact fallback

#include "multidraft/baselines/khisti.hpp"
#include "multidraft/baselines/rrs.hpp"
#include "multidraft/baselines/single_draft.hpp"
#include "multidraft/baselines/spechub.hpp"
#include "multidraft/baselines/spectr.hpp"
#include "multidraft/baselines/topk.hpp"

#include "multidraft/oov/affinity_matrix.hpp"
#include "multidraft/oov/rdk_proposal.hpp"
#include "multidraft/oov/vocabulary_map.hpp"

#include "multidraft/registry/plan_sampling.hpp"
#include "multidraft/registry/verifier_registry.hpp"  // every verifier by name

#include "multidraft/batch/batched_calls.hpp"  // batched transport / verify / acceptance on the pool
