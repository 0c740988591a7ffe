// URLs as model paths (io/remote_url.h): hf:// parsed and resolved against $HF_ENDPOINT, the "@REVISION"
// kept apart from the shard name, origins compared for the token rule, the token's sources in order.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "gguf_reap/error.h"
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

TEST(RemoteUrl, RemotePaths) {
    EXPECT_TRUE(is_remote_path("https://example.org/m.gguf"));
    EXPECT_TRUE(is_remote_path("http://127.0.0.1:8080/m.gguf"));
    EXPECT_TRUE(is_remote_path("hf://org/repo/m.gguf"));
    EXPECT_FALSE(is_remote_path("/models/m.gguf"));
    EXPECT_FALSE(is_remote_path("https:/m.gguf"));
}

TEST(RemoteUrl, HubPaths) {
    ScopedEnv endpoint("HF_ENDPOINT", "http://127.0.0.1:9/");
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

TEST(RemoteUrl, TokenFromEnvironmentThenFile) {
    test::TempDir dir;
    const std::string file = dir.file("token");
    std::ofstream(file) << "  hf_from_file\n";
    const std::string home_dir = dir.path().string();
    ScopedEnv home("HF_HOME", home_dir.c_str());
    ScopedEnv path("HF_TOKEN_PATH", nullptr);
    {
        ScopedEnv token("HF_TOKEN", "hf_from_env");
        EXPECT_EQ(hub_token(), "hf_from_env");
    }
    ScopedEnv token("HF_TOKEN", nullptr);
    EXPECT_EQ(hub_token(), "hf_from_file");
    const std::string none = dir.file("none");
    ScopedEnv elsewhere("HF_HOME", none.c_str());
    EXPECT_EQ(hub_token(), std::nullopt);
}

}  // namespace
}  // namespace gguf_reap
