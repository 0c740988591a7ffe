// SIGINT/SIGTERM turn into a flag that long loops poll; they then throw Interrupted, clean up their
// temporaries and the process exits 130.
#pragma once

namespace gguf_reap {

void install_signal_handlers();
bool interrupted();
// Throws Interrupted when a signal has arrived.
void check_interrupted();

}  // namespace gguf_reap
