// gguf-reap card OUTPUT --source MODEL --rank RANK_DIR [--audit AUDIT.json] [--manifest MANIFEST.json]
// [--eval EVAL.json] [--base-model NAME] [--tp LIST] [--gpu-mem SIZE] [--overhead SIZE] [--ctx N] [--note
// TEXT]... [--calibration CALIBRATE.json]
// [-o README.md | --upload-dir DIR] [--force] [--json]: a Hugging Face model card for a pruned build
// (docs/card.md).
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "gguf_reap/card.h"
#include "gguf_reap/error.h"
#include "gguf_reap/estimate.h"
#include "gguf_reap/version.h"
#include "io/units.h"
#include "ops/card/card_steps.h"

namespace gguf_reap::cli {

namespace {

struct CardCli {
    std::string output;
    std::string source;
    std::string rank_dir;
    std::string audit;
    std::string manifest;
    std::string eval;
    std::string base_model;
    DeploymentOptions deploy;
    std::vector<std::string> notes;
    std::string out;
    std::string upload_dir;
    std::string calibration;
    bool force = false;
    bool json = false;
    std::string hf_repo;
};

int run_card(const CardCli& c) {
    // Options first, so that a typo fails before a large model is opened.
    CardRequest q;
    q.output = c.output;
    q.source = c.source;
    q.rank_dir = c.rank_dir;
    q.audit_json = c.audit;
    q.manifest = c.manifest;
    q.eval_json = c.eval;
    q.base_model = c.base_model;
    q.deployment = deployment_option(c.deploy);
    if (!c.hf_repo.empty()) {
        const size_t slash = c.hf_repo.find('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == c.hf_repo.size() ||
            c.hf_repo.find_first_of(" :/", slash + 1) != std::string::npos)
            throw UsageError(
                fmt::format("--hf-repo '{}' is not a Hugging Face repository (write ORG/REPO)", c.hf_repo));
    }
    q.hf_repo = c.hf_repo;
    for (const auto& n : c.notes)
        if (n.empty() || n.find('\n') != std::string::npos)
            throw UsageError("--note: give one non-empty line of text");
    q.notes = c.notes;
    q.out_path = c.out;
    q.upload_dir = c.upload_dir;
    q.calibration = c.calibration;
    q.force = c.force;
    q.tool_version = std::string(GGUF_REAP_TOOL);

    // Read and cross-check every input, compute the facts once, render (and write) the card.
    const CardResult o = ops::card(q, cli_events(false));
    if (o.write_error) {
        // The card is made: print it rather than lose it, then say why it was not written (exit 3).
        if (c.json)
            print_json(card_json(o.facts));
        else
            std::cout << o.markdown;
        std::rethrow_exception(o.write_error);
    }
    if (c.json) {
        nlohmann::ordered_json j = card_json(o.facts);
        j["written"] = o.written ? nlohmann::ordered_json(c.out) : nlohmann::ordered_json(nullptr);
        if (!c.upload_dir.empty()) {
            nlohmann::ordered_json files = nlohmann::ordered_json::array();
            for (const CardUploadFile& u : o.uploaded) files.push_back({{"name", u.name}, {"how", u.how}});
            j["upload_dir"] = {{"dir", c.upload_dir}, {"files", files}};
        }
        print_json(j);
    } else if (!c.upload_dir.empty()) {
        size_t links = 0, copies = 0;
        for (const CardUploadFile& u : o.uploaded) {
            if (u.how == "link") ++links;
            if (u.how == "copy") ++copies;
        }
        std::cout << fmt::format(
            "wrote {}/README.md and {} files ({} hard links, {} copies): publish the "
            "folder with `hf upload {} {} .`\n",
            c.upload_dir, links + copies, links, copies, c.hf_repo.empty() ? "ORG/REPO" : c.hf_repo,
            c.upload_dir);
    } else if (o.written) {
        std::cout << fmt::format("wrote {} ({} bytes)\n", c.out, o.markdown.size());
    } else {
        std::cout << o.markdown;
    }
    return kExitOk;
}

}  // namespace

Command add_card(CLI::App& app, const GlobalOptions&) {
    auto o = std::make_shared<CardCli>();
    CLI::App* sub =
        app.add_subcommand("card", "Write a Hugging Face model card (README.md) for a pruned build");
    sub->add_option("OUTPUT", o->output, "Any shard of the pruned output set")->required();
    sub->add_option("--source", o->source, "Any shard of the source model it was pruned from")->required();
    sub->add_option("--rank", o->rank_dir, "The directory `rank -o` wrote (keeplist.json, the receipt)")
        ->required();
    sub->add_option("--audit", o->audit,
                    "`audit --json` output for this build (without it: \"not audited\")");
    sub->add_option("--manifest", o->manifest,
                    "The manifest `audit --manifest-out` wrote: the shards' sha256");
    sub->add_option("--eval", o->eval,
                    "`eval -o` JSON that measured this build: the \"Measured against the source\" section");
    sub->add_option("--base-model", o->base_model,
                    "The Hugging Face id of the source (default: from its general.* keys)");
    add_deployment_options(*sub, o->deploy);
    sub->add_option(
        "--hf-repo", o->hf_repo,
        "The repository the build is uploaded to, ORG/REPO: the `llama-server -hf ORG/REPO:QUANT` "
        "lines of \"How to run\"");
    sub->add_option("--note", o->notes, "A line for the card's \"Not verified\" section (repeatable)");
    sub->add_option("-o,--out", o->out, "Write the card to this file (default: print it)");
    auto* upload = sub->add_option("--upload-dir", o->upload_dir,
                                   "Write DIR/README.md and put every file the card names into DIR");
    upload->excludes(sub->get_option("--out"));
    add_calibration_option(*sub, o->calibration, "named by the card, put into --upload-dir");
    sub->add_flag("--force", o->force,
                  "Replace an existing -o file (or the files of an earlier --upload-dir)");
    sub->add_flag("--json", o->json, "Print the card's facts as one JSON document on stdout");
    return {sub, [o] { return run_card(*o); }};
}

}  // namespace gguf_reap::cli
