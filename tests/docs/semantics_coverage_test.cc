// docs/semantics.md stays the truth about which rules are built and what proves them.
//
// The file lists every rule as one bullet, `- **R-MBX-3** (implemented|planned) text`, and an
// implemented rule has a `Tests:` line of `` `file` (`Name`, …) `` groups. This test fails,
// naming the rules, when
//   - an implemented rule's id in test form (`R_MBX_3`) appears in no test file under tests/
//     outside tests/docs (`R_MBX_3` never matches the id of rule 30 of that family),
//   - an implemented rule has no `Tests:` line, or a test it lists is not in the file it names,
//   - a rule id used in a test file is not in docs/semantics.md,
//   - a rule is missing: a rule the spec of issues 1–8 defined is absent, or the ids of one
//     family do not run 1, 2, 3, … without gaps or duplicates.
// Bullets inside fenced code blocks are examples, not rules.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;

const fs::path kSourceDir = POSTAL_SOURCE_DIR;

struct ListedTest {
  std::string file;  // relative to the source dir
  std::string name;
};

struct Rule {
  std::string id;      // R-MBX-3
  std::string status;  // implemented | planned
  int line = 0;
  std::vector<ListedTest> tests;
  bool has_tests_line = false;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// R-MBX-3 → R_MBX_3
std::string test_form(std::string id) {
  std::replace(id.begin(), id.end(), '-', '_');
  return id;
}

// R_MBX_3 → R-MBX-3
std::string doc_form(std::string id) {
  std::replace(id.begin(), id.end(), '_', '-');
  return id;
}

struct ParsedDoc {
  std::vector<Rule> rules;
  std::vector<std::string> errors;
};

ParsedDoc parse_semantics(const std::string& text) {
  static const std::regex kRuleLine(R"(^- \*\*([RM]-[A-Z]+-[0-9]+)\*\* \((implemented|planned)\) \S.*$)");
  static const std::regex kLooseRule(R"(^\s*[-*]\s.*\b[RM]-[A-Z]+-[0-9]+\b.*(implemented|planned))");
  static const std::regex kGroup(R"(`([^`]+)` \(([^)]*)\))");
  static const std::regex kName(R"(`(\w+)`)");
  ParsedDoc doc;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  bool fenced = false;
  Rule* current = nullptr;
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      current = nullptr;
      continue;
    }
    if (fenced) continue;
    std::smatch m;
    if (std::regex_match(line, m, kRuleLine)) {
      doc.rules.push_back(Rule{m[1], m[2], number, {}, false});
      current = &doc.rules.back();
      continue;
    }
    if (std::regex_search(line, kLooseRule) && line.rfind("  ", 0) != 0) {
      doc.errors.push_back("docs/semantics.md:" + std::to_string(number) +
                           ": looks like a rule but is not in the form "
                           "`- **R-XXX-N** (implemented|planned) text`: " + line);
    }
    if (current != nullptr && line.rfind("  Tests: ", 0) == 0) {
      current->has_tests_line = true;
      for (auto g = std::sregex_iterator(line.begin(), line.end(), kGroup);
           g != std::sregex_iterator(); ++g) {
        const std::string file = (*g)[1];
        const std::string names = (*g)[2];
        for (auto n = std::sregex_iterator(names.begin(), names.end(), kName);
             n != std::sregex_iterator(); ++n) {
          current->tests.push_back({file, (*n)[1]});
        }
      }
      continue;
    }
    if (line.empty() || line.rfind("  ", 0) != 0) current = nullptr;
  }
  return doc;
}

const ParsedDoc& semantics() {
  static const ParsedDoc doc = parse_semantics(read_file(kSourceDir / "docs" / "semantics.md"));
  return doc;
}

// Rule ids in test form found in every *.cc / *.h under tests/, outside tests/docs:
// id → files (relative to the source dir).
const std::map<std::string, std::set<std::string>>& ids_in_tests() {
  static const std::map<std::string, std::set<std::string>> ids = [] {
    // Not preceded or followed by an identifier character or digit, so R_MBX_3 never matches
    // inside the id of rule 30 or XR_MBX_3; a following `_` (R_MBX_3_Name) is allowed.
    static const std::regex kId(R"((?:^|[^A-Za-z0-9_])([RM]_[A-Z]+_[0-9]+)(?![0-9]))");
    std::map<std::string, std::set<std::string>> out;
    const fs::path tests = kSourceDir / "tests";
    for (const auto& entry : fs::recursive_directory_iterator(tests)) {
      if (!entry.is_regular_file()) continue;
      const fs::path& p = entry.path();
      if (p.extension() != ".cc" && p.extension() != ".h") continue;
      const std::string rel = fs::relative(p, kSourceDir).generic_string();
      if (rel.rfind("tests/docs/", 0) == 0) continue;
      const std::string text = read_file(p);
      for (auto m = std::sregex_iterator(text.begin(), text.end(), kId);
           m != std::sregex_iterator(); ++m) {
        out[(*m)[1]].insert(rel);
      }
    }
    return out;
  }();
  return ids;
}

// The rules the spec of issues 1–8 defined. Later issues add rules to docs/semantics.md (and may
// add them here); none of these may disappear.
const std::vector<std::string>& founding_rules() {
  static const std::vector<std::string> rules = [] {
    const std::vector<std::pair<std::string, int>> families = {
        {"R-ADDR", 5}, {"R-ENV", 4},  {"R-FAIL", 5},  {"R-MBX", 5},  {"R-PORT", 3},
        {"R-ROUTE", 3}, {"R-GW", 2},  {"R-CHAN", 4},  {"R-ACT", 7},  {"R-SUP", 3},
        {"R-FLOW", 4}, {"R-SEC", 3},  {"M-ADDR", 3},  {"M-KIND", 2}, {"M-PRIO", 2},
        {"M-BOX", 7},  {"M-RECV", 5}, {"M-ACK", 5},   {"M-RETRY", 4}, {"M-DLQ", 3},
        {"M-STAT", 2}, {"M-INBOX", 4}, {"M-STORE", 2},
    };
    std::vector<std::string> out;
    for (const auto& [family, count] : families) {
      for (int i = 1; i <= count; ++i) out.push_back(family + "-" + std::to_string(i));
    }
    return out;
  }();
  return rules;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += "\n  " + s;
  return out;
}

TEST(SemanticsDoc, EveryRuleLineIsInTheStrictFormat) {
  const ParsedDoc& doc = semantics();
  ASSERT_FALSE(doc.rules.empty()) << "no rule found in " << (kSourceDir / "docs/semantics.md");
  EXPECT_TRUE(doc.errors.empty()) << join(doc.errors);
}

TEST(SemanticsDoc, NoRuleIsMissingOrDuplicated) {
  std::map<std::string, int> seen;
  std::map<std::string, std::set<int>> families;
  static const std::regex kParts(R"(^([RM]-[A-Z]+)-([0-9]+)$)");
  for (const Rule& r : semantics().rules) {
    ++seen[r.id];
    std::smatch m;
    ASSERT_TRUE(std::regex_match(r.id, m, kParts));
    families[m[1]].insert(std::stoi(m[2]));
  }
  std::vector<std::string> problems;
  for (const auto& [id, n] : seen) {
    if (n > 1) problems.push_back(id + " is listed " + std::to_string(n) + " times");
  }
  for (const std::string& id : founding_rules()) {
    if (!seen.contains(id)) problems.push_back(id + " is missing");
  }
  for (const auto& [family, numbers] : families) {
    for (int i = 1; i <= *numbers.rbegin(); ++i) {
      const std::string id = family + "-" + std::to_string(i);
      const bool founding = std::find(founding_rules().begin(), founding_rules().end(), id) !=
                            founding_rules().end();
      if (!numbers.contains(i) && !founding) {
        problems.push_back(family + "-" + std::to_string(i) + " is missing (the family has " +
                           family + "-" + std::to_string(*numbers.rbegin()) + ")");
      }
    }
  }
  EXPECT_TRUE(problems.empty()) << "docs/semantics.md:" << join(problems);
}

TEST(SemanticsDoc, EveryImplementedRuleIsNamedByATest) {
  const auto& ids = ids_in_tests();
  std::vector<std::string> untested;
  for (const Rule& r : semantics().rules) {
    if (r.status != "implemented") continue;
    if (!ids.contains(test_form(r.id))) {
      untested.push_back(r.id + " (docs/semantics.md:" + std::to_string(r.line) + "): no test under "
                         "tests/ names " + test_form(r.id) + "; add one, or mark the rule planned");
    }
  }
  EXPECT_TRUE(untested.empty()) << "implemented rules without a test:" << join(untested);
}

TEST(SemanticsDoc, EveryListedTestExistsInItsFile) {
  std::vector<std::string> problems;
  for (const Rule& r : semantics().rules) {
    if (r.status == "planned") {
      if (r.has_tests_line) problems.push_back(r.id + " is planned but lists tests");
      continue;
    }
    if (!r.has_tests_line || r.tests.empty()) {
      problems.push_back(r.id + " is implemented but has no `Tests:` line");
      continue;
    }
    for (const ListedTest& t : r.tests) {
      const fs::path file = kSourceDir / t.file;
      if (!fs::is_regular_file(file)) {
        problems.push_back(r.id + ": " + t.file + " does not exist");
        continue;
      }
      const std::regex declared(", " + t.name + R"(\))");
      if (!std::regex_search(read_file(file), declared)) {
        problems.push_back(r.id + ": " + t.file + " has no test named " + t.name);
      }
      if (t.name.rfind(test_form(r.id) + "_", 0) != 0) {
        problems.push_back(r.id + ": listed test " + t.name + " does not carry " +
                           test_form(r.id));
      }
    }
  }
  EXPECT_TRUE(problems.empty()) << "docs/semantics.md:" << join(problems);
}

TEST(SemanticsDoc, EveryRuleIdUsedInTestsIsDocumented) {
  std::set<std::string> documented;
  for (const Rule& r : semantics().rules) documented.insert(test_form(r.id));
  std::vector<std::string> unknown;
  for (const auto& [id, files] : ids_in_tests()) {
    if (documented.contains(id)) continue;
    std::string where;
    for (const auto& f : files) where += " " + f;
    unknown.push_back(doc_form(id) + " (used in" + where + ") is not in docs/semantics.md");
  }
  EXPECT_TRUE(unknown.empty()) << join(unknown);
}

// The parser itself: the boundary case the rule ids depend on.
TEST(SemanticsDoc, RuleIdMatchIsExactNotAPrefix) {
  static const std::regex kId(R"((?:^|[^A-Za-z0-9_])([RM]_[A-Z]+_[0-9]+)(?![0-9]))");
  auto ids = [](const std::string& text) {
    std::set<std::string> out;
    for (auto m = std::sregex_iterator(text.begin(), text.end(), kId);
         m != std::sregex_iterator(); ++m) {
      out.insert((*m)[1]);
    }
    return out;
  };
  // Rule 30 of the family is spelled in two pieces so that tools grepping tests for rule ids
  // do not take this example for a rule.
  const std::string thirty = std::string("R_MBX_3") + "0";
  EXPECT_EQ(ids("TEST(X, " + thirty + "_Foo)"), std::set<std::string>{thirty});
  EXPECT_EQ(ids("TEST(X, R_MBX_3_Foo)"), std::set<std::string>{"R_MBX_3"});
  EXPECT_EQ(ids("// R_MBX_3: why"), std::set<std::string>{"R_MBX_3"});
  EXPECT_TRUE(ids("XR_MBX_3 kR_MBX_3").empty());
}

}  // namespace
