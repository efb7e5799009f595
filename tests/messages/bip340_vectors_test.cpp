// The official BIP-340 test vectors (bitcoin/bips bip-0340/test-vectors.csv):
// rows 0-4 must verify, rows 5-14 must not.

#include "messages/proto/event.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>
#include "tests/support/test_paths.hpp"

using namespace waggle::proto;

namespace {

struct vector_row {
  int index = -1;
  std::string secret, pubkey, aux, message, signature;
  bool expected = false;
  std::string comment;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<vector_row> load_vectors() {
  std::ifstream in(std::string(waggle::test_paths::testdata) + "/bip340-vectors.csv");
  EXPECT_TRUE(in.good()) << "cannot open " << waggle::test_paths::testdata << "/bip340-vectors.csv";
  std::vector<vector_row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.empty())
      continue;
    if (header) {
      header = false;
      EXPECT_EQ(line.rfind("index,secret key,public key", 0), 0u) << line;
      continue;
    }
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string col;
    // The comment (last column) may contain commas: split the first 7 only.
    for (int i = 0; i < 7 && std::getline(ss, col, ','); ++i)
      cols.push_back(col);
    std::getline(ss, col);
    EXPECT_EQ(cols.size(), 7u) << line;
    if (cols.size() != 7)
      continue;
    vector_row r;
    r.index = std::stoi(cols[0]);
    r.secret = cols[1];
    r.pubkey = cols[2];
    r.aux = cols[3];
    r.message = cols[4];
    r.signature = cols[5];
    EXPECT_TRUE(cols[6] == "TRUE" || cols[6] == "FALSE") << line;
    r.expected = cols[6] == "TRUE";
    r.comment = col;
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

// The pre-final drafts of BIP-340 (before 2020) required R to have a square
// Y; the final BIP, libsecp256k1 and every Nostr client require an even Y. The
// draft file is recognisable by row 6's comment ("has_square_y(R) is false").
bool is_square_y_draft(const std::vector<vector_row>& rows) {
  return rows.size() > 6 && rows[6].comment.find("has_square_y") != std::string::npos;
}

TEST(Bip340, FileHasFifteenRows) {
  auto rows = load_vectors();
  ASSERT_EQ(rows.size(), 15u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].index, static_cast<int>(i));
    EXPECT_EQ(rows[i].expected, i <= 4) << "row " << i;
  }
}

// Every row of the shared file. Rows 5-14 must fail under any version of the
// spec. Rows 0-4 verify only if the file is the final BIP-340; the shared file
// is currently the square-Y draft, whose valid signatures are NOT valid
// BIP-340 signatures, and a Nostr relay that accepted them would be wrong. So
// the test asserts what the final spec says about each row, and names which
// file it saw. (Reported in the issue note: the file should be replaced by
// the final bitcoin/bips bip-0340/test-vectors.csv.)
TEST(Bip340, VerifyEveryRowOfTheSharedFile) {
  auto rows = load_vectors();
  ASSERT_EQ(rows.size(), 15u);
  const bool draft = is_square_y_draft(rows);
  int verified = 0, rejected = 0;
  for (const auto& r : rows) {
    const bool got = verify_schnorr(lower(r.pubkey), lower(r.message), lower(r.signature));
    const bool final_spec_expects = draft ? false : r.expected;
    EXPECT_EQ(got, final_spec_expects)
      << "row " << r.index << (draft ? " (square-Y draft file)" : "") << ": " << r.comment;
    // verify_schnorr's decoder also takes the CSV's uppercase hex as is.
    EXPECT_EQ(verify_schnorr(r.pubkey, r.message, r.signature), got) << "row " << r.index;
    (got ? verified : rejected)++;
  }
  EXPECT_EQ(verified, draft ? 0 : 5);
  EXPECT_EQ(rejected, draft ? 15 : 10);
  if (draft)
    std::cout << "[ NOTE     ] shared bip340-vectors.csv is the pre-final square-Y draft: rows "
                 "5-14 fail as required; rows 0-4 are draft signatures and correctly fail "
                 "final BIP-340 verification. The final vectors are checked below.\n";
}

TEST(Bip340, PublicKeysFromSecretKeys) {
  int checked = 0;
  for (const auto& r : load_vectors()) {
    if (r.secret.empty())
      continue;
    EXPECT_EQ(pubkey_of(lower(r.secret)), lower(r.pubkey)) << "row " << r.index;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// The final BIP-340 vectors 0-14 (bitcoin/bips, bip-0340/test-vectors.csv),
// embedded so the implementation is checked even if the data file is stale.
namespace {
struct embedded_vector {
  int index;
  const char* pubkey;
  const char* message;
  const char* signature;
  bool expected;
};
const embedded_vector final_vectors[] = {
    {0, "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9", "0000000000000000000000000000000000000000000000000000000000000000", "E907831F80848D1069A5371B402410364BDF1C5F8307B0084C55F1CE2DCA821525F66A4A85EA8B71E482A74F382D2CE5EBEEE8FDB2172F477DF4900D310536C0", true},
    {1, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6896BD60EEAE296DB48A229FF71DFE071BDE413E6D43F917DC8DCF8C78DE33418906D11AC976ABCCB20B091292BFF4EA897EFCB639EA871CFA95F6DE339E4B0A", true},
    {2, "DD308AFEC5777E13121FA72B9CC1B7CC0139715309B086C960E18FD969774EB8", "7E2D58D8B3BCDF1ABADEC7829054F90DDA9805AAB56C77333024B9D0A508B75C", "5831AAEED7B44BB74E5EAB94BA9D4294C49BCF2A60728D8B4C200F50DD313C1BAB745879A5AD954A72C45A91C3A51D3C7ADEA98D82F8481E0E1E03674A6F3FB7", true},
    {3, "25D1DFF95105F5253C4022F628A996AD3A0D95FBF21D468A1B33F8C160D8F517", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "7EB0509757E246F19449885651611CB965ECC1A187DD51B64FDA1EDC9637D5EC97582B9CB13DB3933705B32BA982AF5AF25FD78881EBB32771FC5922EFC66EA3", true},
    {4, "D69C3509BB99E412E68B0FE8544E72837DFA30746D8BE2AA65975F29D22DC7B9", "4DF3C3F68FCC83B27E9D42C90431A72499F17875C81A599B566C9889B9696703", "00000000000000000000003B78CE563F89A0ED9414F5AA28AD0D96D6795F9C6376AFB1548AF603B3EB45C9F8207DEE1060CB71C04E80F593060B07D28308D7F4", true},
    {5, "EEFDEA4CDB677750A420FEE807EACF21EB9898AE79B9768766E4FAA04A2D4A34", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
    {6, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "FFF97BD5755EEEA420453A14355235D382F6472F8568A18B2F057A14602975563CC27944640AC607CD107AE10923D9EF7A73C643E166BE5EBEAFA34B1AC553E2", false},
    {7, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "1FA62E331EDBC21C394792D2AB1100A7B432B013DF3F6FF4F99FCB33E0E1515F28890B3EDB6E7189B630448B515CE4F8622A954CFE545735AAEA5134FCCDB2BD", false},
    {8, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769961764B3AA9B2FFCB6EF947B6887A226E8D7C93E00C5ED0C1834FF0D0C2E6DA6", false},
    {9, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "0000000000000000000000000000000000000000000000000000000000000000123DDA8328AF9C23A94C1FEECFD123BA4FB73476F0D594DCB65C6425BD186051", false},
    {10, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "00000000000000000000000000000000000000000000000000000000000000017615FBAF5AE28864013C099742DEADB4DBA87F11AC6754F93780D5A1837CF197", false},
    {11, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "4A298DACAE57395A15D0795DDBFD1DCB564DA82B0F269BC70A74F8220429BA1D69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
    {12, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F69E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
    {13, "DFF1D77F2A671C5F36183726DB2341BE58FEAE1DA2DECED843240F7B502BA659", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E177769FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141", false},
    {14, "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC30", "243F6A8885A308D313198A2E03707344A4093822299F31D0082EFA98EC4E6C89", "6CFF5C3BA86C69EA4B7376F31A9BCB4F74C1976089B2D9963DA2E5543E17776969E89B4C5564D00349106B8497785DD7D1D713A8AE82B32FA79D5F7FC407D39B", false},
};
}  // namespace

TEST(Bip340, EmbeddedFinalVectors) {
  ASSERT_EQ(std::size(final_vectors), 15u);
  for (const auto& v : final_vectors) {
    EXPECT_EQ(verify_schnorr(lower(v.pubkey), lower(v.message), lower(v.signature)), v.expected)
        << "final vector " << v.index;
    EXPECT_EQ(v.expected, v.index <= 4);
  }
}

TEST(Bip340, EventSignatureUsesTheSameCheck) {
  // A Nostr event's id is the 32-byte message: final vector 1 dressed as an event.
  const auto& v = final_vectors[1];
  event ev;
  ev.pubkey = lower(v.pubkey);
  ev.id = lower(v.message);
  ev.sig = lower(v.signature);
  EXPECT_TRUE(verify_signature(ev));
  ev.sig[127] = ev.sig[127] == '0' ? '1' : '0';
  EXPECT_FALSE(verify_signature(ev));
}
