// URLs as model paths (io/remote_url.h): hf:// parsed and resolved against the settings' endpoint, the
// "@REVISION" kept apart from the shard name, origins compared for the token rule, the token's sources in
// order; and the one door from the environment to those settings (cli/environment.h).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "cli/environment.h"
#include "gguf_reap/error.h"
#include "gguf_reap/remote.h"
#include "io/hub_cache.h"
#include "io/hub_repo.h"
#include "io/remote_url.h"
#include "test_util.h"

namespace gguf_reap {
namespace {

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = ::getenv(name)) old_ = old;
        if (value)
            ::setenv(name, value, 1);
        else
            ::unsetenv(name);
    }
    ~ScopedEnv() {
        if (old_)
            ::setenv(name_, old_->c_str(), 1);
        else
            ::unsetenv(name_);
    }

  private:
    const char* name_;
    std::optional<std::string> old_;
};

// Sets the process's RemoteSettings for one test and restores the defaults after.
class ScopedSettings {
  public:
    explicit ScopedSettings(const RemoteSettings& s) { set_remote_settings(s); }
    ~ScopedSettings() { set_remote_settings(RemoteSettings{}); }
};

TEST(RemoteUrl, RemotePaths) {
    EXPECT_TRUE(is_remote_path("https://example.org/m.gguf"));
    EXPECT_TRUE(is_remote_path("http://127.0.0.1:8080/m.gguf"));
    EXPECT_TRUE(is_remote_path("hf://org/repo/m.gguf"));
    EXPECT_FALSE(is_remote_path("/models/m.gguf"));
    EXPECT_FALSE(is_remote_path("https:/m.gguf"));
}

TEST(RemoteUrl, HubPaths) {
    RemoteSettings s;
    s.hub_endpoint = "http://127.0.0.1:9/";
    ScopedSettings settings(s);
    auto p = parse_hub_path("hf://org/repo/dir/m-00001-of-00002.gguf@v1.0");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->repo, "org/repo");
    EXPECT_EQ(p->file, "dir/m-00001-of-00002.gguf");
    EXPECT_EQ(p->revision, "v1.0");
    EXPECT_EQ(hub_resolve_url(*p, "abc"),
              "http://127.0.0.1:9/org/repo/resolve/abc/dir/m-00001-of-00002.gguf");
    p = parse_hub_path("hf://org/repo/m.gguf");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->revision, "main");
    EXPECT_FALSE(parse_hub_path("https://org/repo/m.gguf"));
    for (const char* bad :
         {"hf://org/m.gguf", "hf://org//m.gguf", "hf:///repo/m.gguf", "hf://org/repo/", "hf://o/r/m@"}) {
        try {
            parse_hub_path(bad);
            ADD_FAILURE() << bad << " was accepted";
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()),
                      std::string(bad) + ": a Hub path is hf://ORG/REPO/PATH[@REVISION]");
        }
    }
}

TEST(HubQuant, ParsedAsLlamaCppSpellsIt) {
    const auto q = parse_hub_quant("hf://unsloth/Kimi-K3-GGUF:UD-Q4_K_XL@v1.1");
    ASSERT_TRUE(q);
    EXPECT_EQ(q->repo, "unsloth/Kimi-K3-GGUF");
    EXPECT_EQ(q->quant, "UD-Q4_K_XL");
    EXPECT_EQ(q->revision, "v1.1");
    EXPECT_EQ(parse_hub_quant("hf://o/r:Q8_0")->revision, "main");
    // Not the form: a file path (even one holding a ':'), a URL, a local path.
    EXPECT_FALSE(parse_hub_quant("hf://o/r/dir/a:b.gguf"));
    EXPECT_FALSE(parse_hub_quant("hf://o/r/m.gguf"));
    EXPECT_FALSE(parse_hub_quant("https://h/o/r:Q8_0"));
    EXPECT_FALSE(parse_hub_quant("o/r:Q8_0"));
    for (const char* bad : {"hf://o/r:", "hf://o/:Q8_0", "hf:///r:Q8_0", "hf://o/r:Q8 0", "hf://o/r:Q8_0@"})
        EXPECT_THROW(parse_hub_quant(bad), UsageError) << bad;
}

TEST(HubQuant, TreeListingKeepsFilesAndTheirSha256) {
    const std::string sha(64, 'a');
    const auto files = parse_hub_tree("t", R"([
        {"type": "directory", "path": "Q8_0", "size": 0},
        {"type": "file", "path": "Q8_0/m-Q8_0-00001-of-00002.gguf", "size": 10, "lfs": {"oid": ")" +
                                               sha + R"("}},
        {"type": "file", "path": "README.md", "size": 3, "oid": "0123"},
        {"type": "file", "path": "../escape.gguf", "size": 1},
        {"type": "file", "path": "/abs.gguf", "size": 1},
        {"type": "file", "path": "bad-oid.gguf", "size": 1, "lfs": {"oid": "xyz"}},
        {"type": "file"}, 7, null
    ])");
    ASSERT_EQ(files.size(), 3u);
    EXPECT_EQ(files[0].path, "Q8_0/m-Q8_0-00001-of-00002.gguf");
    EXPECT_EQ(files[0].size, 10u);
    EXPECT_EQ(files[0].sha256, sha);
    EXPECT_EQ(files[1].sha256, "");  // not in LFS: its oid is git's, not a sha256
    EXPECT_EQ(files[2].sha256, "");  // an oid that is no sha256
    EXPECT_THROW(parse_hub_tree("t", R"({"error": "x"})"), Error);
    EXPECT_THROW(parse_hub_tree("t", "not json"), Error);
}

TEST(HubQuant, TheQuantPicksOneSetWhole) {
    auto f = [](const char* p) { return HubFile{p, 1, ""}; };
    const std::vector<HubFile> files = {f("Q8_0/m-Q8_0-00002-of-00002.gguf"),
                                        f("Q8_0/m-Q8_0-00001-of-00002.gguf"),
                                        f("m-IQ4_XS.gguf"),
                                        f("m-Q4_K_M.gguf"),
                                        f("m-UD-Q4_K_M.gguf"),
                                        f("mmproj-Q8_0.gguf"),
                                        f("m-Q8_0-imatrix.gguf"),
                                        f("m-BF16.gguf.part"),
                                        f("README.md")};
    const auto q8 = pick_hub_quant("t", files, "q8_0");
    ASSERT_EQ(q8.size(), 2u);
    EXPECT_EQ(q8[0].path, "Q8_0/m-Q8_0-00001-of-00002.gguf");  // in the order of the shards' numbers
    EXPECT_EQ(q8[1].path, "Q8_0/m-Q8_0-00002-of-00002.gguf");
    EXPECT_EQ(pick_hub_quant("t", files, "UD-Q4_K_M")[0].path, "m-UD-Q4_K_M.gguf");
    EXPECT_EQ(pick_hub_quant("t", files, "iq4_xs")[0].path, "m-IQ4_XS.gguf");
    try {
        pick_hub_quant("t", files, "Q4_XS");  // a word of the name only: IQ4_XS is another quant
        ADD_FAILURE() << "Q4_XS matched IQ4_XS";
    } catch (const Error& e) {
        EXPECT_EQ(e.exit_code(), kExitBadInput);
        EXPECT_NE(std::string(e.what()).find("no .gguf model matches the quant 'Q4_XS'"), std::string::npos);
    }
    try {
        pick_hub_quant("t", files, "Q4_K_M");
        ADD_FAILURE() << "an ambiguous quant was taken";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("matches 2 models: m-Q4_K_M.gguf ("), std::string::npos)
            << e.what();
    }
    try {
        pick_hub_quant("t", {f("Q8_0/m-Q8_0-00001-of-00002.gguf")}, "Q8_0");
        ADD_FAILURE() << "a set with a shard missing was taken";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("lists no shard 2 of 2"), std::string::npos) << e.what();
    }
}

TEST(RemoteUrl, RevisionSuffixStaysOffShardNames) {
    EXPECT_EQ(split_revision_suffix("hf://o/r/m-00001-of-00002.gguf@main"),
              std::make_pair(std::string("hf://o/r/m-00001-of-00002.gguf"), std::string("@main")));
    EXPECT_EQ(split_revision_suffix("hf://o/r/m.gguf").second, "");
    // An '@' in a directory is not a revision; nor is one in an http URL.
    EXPECT_EQ(split_revision_suffix("hf://o/r/a@b/m.gguf").second, "");
    EXPECT_EQ(split_revision_suffix("http://h/m.gguf@x").second, "");
}

TEST(RemoteUrl, Origins) {
    EXPECT_EQ(url_origin("https://HuggingFace.co/org/repo"), "https://huggingface.co:443");
    EXPECT_EQ(url_origin("http://127.0.0.1:8080/x"), "http://127.0.0.1:8080");
    EXPECT_NE(url_origin("http://127.0.0.1:8080/x"), url_origin("http://localhost:8080/x"));
    EXPECT_NE(url_origin("http://127.0.0.1:8080/x"), url_origin("http://127.0.0.1:8081/x"));
    EXPECT_EQ(url_origin("not a url"), "");
}

TEST(RemoteUrl, TokenFromSettingsThenFile) {
    test::TempDir dir;
    const std::string file = dir.file("token");
    std::ofstream(file) << "  hf_from_file\n";
    RemoteSettings s;
    s.hub_token_file = file;
    s.hub_token = " hf_given ";
    {
        ScopedSettings settings(s);
        EXPECT_EQ(hub_token(), "hf_given");
    }
    s.hub_token.reset();
    {
        ScopedSettings settings(s);
        EXPECT_EQ(hub_token(), "hf_from_file");
    }
    s.hub_token_file = dir.file("none");
    ScopedSettings settings(s);
    EXPECT_EQ(hub_token(), std::nullopt);
    EXPECT_NE(token_hint().find(s.hub_token_file), std::string::npos) << token_hint();
}

TEST(RemoteUrl, SettingsOutOfRangeAreRefused) {
    RemoteSettings s;
    s.http_connections = 65;
    EXPECT_THROW(set_remote_settings(s), UsageError);
    s.http_connections = 1;
    s.http_stall_seconds = 0;
    EXPECT_THROW(set_remote_settings(s), UsageError);
    EXPECT_EQ(remote_settings().http_connections, RemoteSettings{}.http_connections)
        << "a refusal changes nothing";
}

// The environment reaches the library through the command only (issue 39): cli::remote_settings_from_env.
TEST(CliEnvironment, RemoteSettingsFromTheEnvironment) {
    test::TempDir dir;
    const std::string home_dir = dir.path().string();
    ScopedEnv home("HF_HOME", home_dir.c_str());
    ScopedEnv path("HF_TOKEN_PATH", nullptr);
    ScopedEnv token("HF_TOKEN", "hf_from_env");
    ScopedEnv endpoint("HF_ENDPOINT", "http://127.0.0.1:9/");
    ScopedEnv retries("GGUF_REAP_HTTP_RETRIES", "3");
    ScopedEnv backoff("GGUF_REAP_HTTP_BACKOFF_MS", "20");
    ScopedEnv timeout("GGUF_REAP_HTTP_TIMEOUT", "5");
    ScopedEnv connections("GGUF_REAP_HTTP_CONNECTIONS", "2");
    const RemoteSettings s = cli::remote_settings_from_env();
    EXPECT_EQ(s.hub_endpoint, "http://127.0.0.1:9/");
    EXPECT_EQ(s.hub_token, "hf_from_env");
    EXPECT_EQ(s.hub_token_file, home_dir + "/token");
    EXPECT_EQ(s.http_retries, 3u);
    EXPECT_EQ(s.http_first_backoff_ms, 20u);
    EXPECT_EQ(s.http_stall_seconds, 5u);
    EXPECT_EQ(s.http_connections, 2u);
    {
        ScopedEnv given("HF_TOKEN_PATH", "/elsewhere/token");
        EXPECT_EQ(cli::remote_settings_from_env().hub_token_file, "/elsewhere/token");
    }
    ScopedSettings settings(s);
    EXPECT_EQ(hub_endpoint(), "http://127.0.0.1:9") << "the trailing '/' goes";
}

TEST(CliEnvironment, MalformedNumbersNameTheVariable) {
    const std::pair<const char*, const char*> cases[] = {
        {"GGUF_REAP_HTTP_RETRIES", "three"},
        {"GGUF_REAP_HTTP_CONNECTIONS", "65"},
        {"GGUF_REAP_HTTP_TIMEOUT", "0"},
    };
    const std::string expected[] = {"GGUF_REAP_HTTP_RETRIES=three: not a number",
                                    "GGUF_REAP_HTTP_CONNECTIONS=65: 1 to 64",
                                    "GGUF_REAP_HTTP_TIMEOUT=0: 1 to 86400"};
    for (size_t i = 0; i < 3; ++i) {
        ScopedEnv bad(cases[i].first, cases[i].second);
        try {
            cli::remote_settings_from_env();
            ADD_FAILURE() << cases[i].first << "=" << cases[i].second << " was accepted";
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()), expected[i]);
        }
    }
}

// The cache's root in huggingface_hub's order: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub,
// XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
TEST(CliEnvironment, HubCacheInHuggingFaceHubsOrder) {
    ScopedEnv hub("HF_HUB_CACHE", "/a");
    ScopedEnv old("HUGGINGFACE_HUB_CACHE", "/b");
    ScopedEnv home("HF_HOME", "/c");
    ScopedEnv xdg("XDG_CACHE_HOME", "/d");
    ScopedEnv user("HOME", "/e");
    EXPECT_EQ(cli::remote_settings_from_env().hub_cache, "/a");
    ::unsetenv("HF_HUB_CACHE");
    EXPECT_EQ(cli::remote_settings_from_env().hub_cache, "/b");
    ::unsetenv("HUGGINGFACE_HUB_CACHE");
    EXPECT_EQ(cli::remote_settings_from_env().hub_cache, "/c/hub");
    ::unsetenv("HF_HOME");
    EXPECT_EQ(cli::remote_settings_from_env().hub_cache, "/d/huggingface/hub");
    ::unsetenv("XDG_CACHE_HOME");
    EXPECT_EQ(cli::remote_settings_from_env().hub_cache, "/e/.cache/huggingface/hub");
    ::unsetenv("HOME");
    EXPECT_EQ(cli::remote_settings_from_env().hub_cache, "");
}

// A snapshot entry is the Hub's file when its size is the pinned one and its blob, named by a sha256,
// is the Hub's sha256; nothing outside the repository's snapshot is ever looked at.
TEST(HubCache, OnlyTheHubsFileIsUsable) {
    test::TempDir dir;
    RemoteSettings rs;
    rs.hub_cache = dir.path().string();
    ScopedSettings settings(rs);
    const std::string commit(40, 'a'), sha(64, 'b'), other(64, 'c');
    const auto repo = dir.path() / "models--org--repo";
    std::filesystem::create_directories(repo / "blobs");
    std::filesystem::create_directories(repo / "snapshots" / commit / "Q8_0");
    std::ofstream(repo / "blobs" / sha) << "0123456789";
    std::filesystem::create_symlink("../../../blobs/" + sha, repo / "snapshots" / commit / "Q8_0" / "m.gguf");
    const std::string want = (repo / "snapshots" / commit / "Q8_0" / "m.gguf").string();

    HubCacheEntry e = find_in_hub_cache("org/repo", commit, "Q8_0/m.gguf", 10, sha);
    EXPECT_TRUE(e.usable()) << e.problem;
    EXPECT_EQ(e.path, want);
    EXPECT_TRUE(find_in_hub_cache("org/repo", commit, "Q8_0/m.gguf", 10, "").usable()) << "no sha256 known";
    e = find_in_hub_cache("org/repo", commit, "Q8_0/m.gguf", 11, sha);
    EXPECT_TRUE(e.present);
    EXPECT_EQ(e.problem, "holds 10 bytes, the Hub's file 11");
    e = find_in_hub_cache("org/repo", commit, "Q8_0/m.gguf", 10, other);
    EXPECT_EQ(e.problem, "is the blob " + sha + ", the Hub's file has the sha256 " + other);
    e = find_in_hub_cache("org/repo", commit, "Q8_0/none.gguf", 10, sha);
    EXPECT_FALSE(e.present);
    EXPECT_FALSE(e.path.empty()) << "where it would be, for the refusal";

    std::filesystem::create_symlink("../../blobs/" + other, repo / "snapshots" / commit / "gone.gguf");
    EXPECT_FALSE(find_in_hub_cache("org/repo", commit, "gone.gguf", 10, "").present) << "a dangling link";
    for (const char* bad : {"../../blobs/x", "/etc/passwd", "Q8_0/../m.gguf", "Q8_0//m.gguf", ""})
        EXPECT_TRUE(find_in_hub_cache("org/repo", commit, bad, 10, "").path.empty()) << bad;
    EXPECT_TRUE(find_in_hub_cache("org/repo", "main", "Q8_0/m.gguf", 10, "").path.empty())
        << "a branch name has no snapshot";
    ScopedSettings none(RemoteSettings{});
    EXPECT_TRUE(find_in_hub_cache("org/repo", commit, "Q8_0/m.gguf", 10, "").path.empty());
}

TEST(HubCache, EtagsAndTheDownloadCommand) {
    const std::string sha(64, 'e');
    EXPECT_EQ(sha256_of_etag("\"" + sha + "\""), sha);
    EXPECT_EQ(sha256_of_etag("W/\"" + sha + "\""), sha);
    EXPECT_EQ(sha256_of_etag("\"abc\""), "");
    EXPECT_EQ(hf_download_command("org/repo", "Q8_0/m-*-of-00003.gguf", ""),
              "hf download org/repo --include 'Q8_0/m-*-of-00003.gguf'");
    EXPECT_EQ(hf_download_command("org/repo", "m.gguf", "abc"),
              "hf download org/repo --include 'm.gguf' --revision abc");
}

}  // namespace
}  // namespace gguf_reap
