// The audit itself, without what ops::audit (include/gguf_reap/audit.h) adds around it (the manifest
// written when asked): what the tests run.
#pragma once

#include "gguf_reap/audit.h"

namespace gguf_reap {

// Runs the audit. Throws InputError/UsageError (bad source, keeplist, manifest, or an OUTPUT that is
// not a GGUF file at all), IoError, Interrupted.
// `events` gets the byte pass's progress (bytes of the output read, all shards together).
AuditReport run_audit(const AuditOptions& opts, const Events& events = {});

}  // namespace gguf_reap
