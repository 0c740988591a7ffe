#include "cli/app.h"

int main(int argc, char** argv) {
    return gguf_reap::cli::run(argc, argv);
}
