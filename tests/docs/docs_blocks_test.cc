// Every topology written in the docs is one `postal up` would accept.
//
// Each fenced block whose info string is exactly `toml` in README.md and docs/*.md is parsed with
// `routing::parse_topology`; a block that does not parse fails the test with its file and line
// and the parser's message. A block tagged `toml fragment` is a deliberate excerpt (a table shown
// alone) and is skipped. Topologies that ship as files (examples/topologies/*.toml) are checked
// too, since the docs point to them. (The docs' `cpp program` blocks are built and run by
// tests/docs/CMakeLists.txt, not here.)
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "postal/routing/topology_spec.h"

namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = POSTAL_SOURCE_DIR;

struct Block {
  std::string file;  // relative to the source dir
  int line = 0;      // of the block's first content line
  std::string info;  // the fence's info string, e.g. "toml" or "toml fragment"
  std::string text;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<fs::path> markdown_files() {
  std::vector<fs::path> files = {kSourceDir / "README.md"};
  for (const auto& entry : fs::directory_iterator(kSourceDir / "docs")) {
    if (entry.is_regular_file() && entry.path().extension() == ".md") files.push_back(entry.path());
  }
  return files;
}

// Fenced blocks (``` at the start of a line) of one Markdown file.
std::vector<Block> fenced_blocks(const fs::path& path) {
  std::vector<Block> blocks;
  std::istringstream in(read_file(path));
  std::string line;
  int number = 0;
  Block* open = nullptr;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      if (open == nullptr) {
        blocks.push_back(Block{fs::relative(path, kSourceDir).generic_string(), number + 1,
                               line.substr(3), ""});
        open = &blocks.back();
      } else {
        open = nullptr;
      }
      continue;
    }
    if (open != nullptr) open->text += line + "\n";
  }
  return blocks;
}

std::vector<Block> toml_blocks(int* fragments) {
  std::vector<Block> out;
  for (const fs::path& md : markdown_files()) {
    for (Block& b : fenced_blocks(md)) {
      if (b.info == "toml") out.push_back(std::move(b));
      else if (b.info == "toml fragment") ++*fragments;
    }
  }
  return out;
}

TEST(DocsBlocks, EveryTomlBlockIsATopologyThatParses) {
  int fragments = 0;
  const std::vector<Block> blocks = toml_blocks(&fragments);
  ASSERT_FALSE(blocks.empty()) << "no ```toml block found in README.md or docs/*.md";
  for (const Block& b : blocks) {
    const std::string where = b.file + ":" + std::to_string(b.line);
    // Blank lines in front of the block make the parser's line numbers those of the file.
    const std::string text = std::string(static_cast<size_t>(b.line - 1), '\n') + b.text;
    absl::StatusOr<postal::routing::TopologySpec> spec =
        postal::routing::parse_topology(text, b.file);
    EXPECT_TRUE(spec.ok()) << "the ```toml block at " << where
                           << " is not a valid topology (tag it ```toml fragment if it is "
                              "deliberately partial): "
                           << spec.status().message();
  }
}

TEST(DocsBlocks, ShippedTopologyFilesLoad) {
  for (const auto& entry : fs::directory_iterator(kSourceDir / "examples" / "topologies")) {
    if (entry.path().extension() != ".toml") continue;
    absl::StatusOr<postal::routing::TopologySpec> spec =
        postal::routing::load_topology(entry.path().string());
    EXPECT_TRUE(spec.ok()) << spec.status().message();
  }
}

// The extraction itself: fences, info strings and line numbers.
TEST(DocsBlocks, FencedBlocksKeepTheirInfoStringAndFirstLine) {
  const fs::path tmp = fs::temp_directory_path() / "postal_docs_blocks_test.md";
  {
    std::ofstream out(tmp);
    out << "# t\n\n```toml\na = 1\n```\n\ntext\n```toml fragment\nb = 2\n```\n";
  }
  std::vector<Block> blocks = fenced_blocks(tmp);
  fs::remove(tmp);
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].info, "toml");
  EXPECT_EQ(blocks[0].line, 4);
  EXPECT_EQ(blocks[0].text, "a = 1\n");
  EXPECT_EQ(blocks[1].info, "toml fragment");
  EXPECT_EQ(blocks[1].line, 9);
}

}  // namespace
