// examples/embed: prunes a model through gguf-reap's library, as a program outside its tree does it:
// rank (a quarter of the experts of every block, from one imatrix), splice, then audit the output
// against the source, byte for byte.
//
//   embed MODEL IMATRIX OUT_DIR        exit 0: audited clean; 1: audit findings; 2: an error
#include <cstdio>
#include <exception>

#include <gguf_reap/audit.h>
#include <gguf_reap/error.h>
#include <gguf_reap/rank.h>
#include <gguf_reap/splice.h>

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: embed MODEL IMATRIX OUT_DIR\n");
        return 2;
    }
    const std::string model = argv[1], imatrix = argv[2], out = argv[3];
    try {
        gguf_reap::ops::RankRequest rank;
        rank.options.model = model;
        rank.options.imatrices.push_back({"calibration", imatrix});
        rank.options.ratio = 0.25;
        rank.out_dir = out + "/rank";
        const gguf_reap::ops::RankResult ranked = gguf_reap::ops::rank(rank);

        gguf_reap::ops::SpliceRequest splice;
        splice.model = model;
        splice.keeplist = ranked.keeplist_path;
        splice.options.out_prefix = out + "/pruned";
        const auto spliced = gguf_reap::ops::splice(splice);  // its outputs: the shards' final names

        gguf_reap::ops::AuditRequest audit;
        audit.options.output = spliced->outputs.front();
        audit.options.source = model;
        audit.options.keeplist = ranked.keeplist_path;
        const gguf_reap::ops::AuditResult audited = gguf_reap::ops::audit(audit);
        std::printf("ranked into %s, spliced into %s (%llu bytes), audit %s (%zu findings)\n",
                    rank.out_dir.c_str(), spliced->outputs.front().c_str(),
                    static_cast<unsigned long long>(spliced->bytes_written),
                    audited.report.passed() ? "passed" : "FAILED", audited.report.findings.size());
        return audited.report.passed() ? 0 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "embed: %s\n", e.what());
        return 2;
    }
}
