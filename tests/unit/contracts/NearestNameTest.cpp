//===- NearestNameTest.cpp - "did you mean ...?" -------------------------===//
#include "moec/contracts/NearestName.h"

#include <gtest/gtest.h>

namespace moec {
namespace {

TEST(NearestName, EditDistanceCountsInsertionsDeletionsAndReplacementsIgnoringCase) {
  EXPECT_EQ(editDistanceInsensitive("", ""), 0u);
  EXPECT_EQ(editDistanceInsensitive("", "abc"), 3u);
  EXPECT_EQ(editDistanceInsensitive("abc", ""), 3u);
  EXPECT_EQ(editDistanceInsensitive("topk", "top_k"), 1u);       // an insertion
  EXPECT_EQ(editDistanceInsensitive("top__k", "top_k"), 1u);     // a deletion
  EXPECT_EQ(editDistanceInsensitive("top-k", "top_k"), 1u);      // a replacement
  EXPECT_EQ(editDistanceInsensitive("Drop_Pad_Mod", "drop_pad_mode"), 1u); // case is free
  EXPECT_EQ(editDistanceInsensitive("kitten", "sitting"), 3u);
  EXPECT_EQ(editDistanceInsensitive("sitting", "kitten"), 3u);
  EXPECT_EQ(editDistanceInsensitive("flaw", "lawn"), 2u);
}

TEST(NearestName, SuggestsATypoNotAnotherWord) {
  std::vector<std::string> names{"H", "E", "top_k", "K", "drop_pad_mode", "active_num"};
  EXPECT_EQ(nearestName("topk", names), "top_k");
  EXPECT_EQ(nearestName("h", names), "H");
  EXPECT_EQ(nearestName("k", names), "K"); // the same name in another case
  EXPECT_EQ(nearestName("actve_nm", names), "active_num");
  // A one-letter name is never a typo of another letter; a third of the letters at most may differ.
  EXPECT_EQ(nearestName("X", names), "");
  EXPECT_EQ(nearestName("topkk_x", names), "");
  EXPECT_EQ(nearestName("", names), "");
  EXPECT_EQ(nearestName("topk", {}), "");
  // Equally near: the first candidate wins, so the order the caller gives (the op's) decides.
  EXPECT_EQ(nearestName("ab", {"a", "b"}), "a");
}

TEST(NearestName, DidYouMeanIsAMessageTail) {
  EXPECT_EQ(didYouMean("topk", {"top_k"}), "; did you mean 'top_k'?");
  EXPECT_EQ(didYouMean("Q", {"top_k", "H"}), "");
}

} // namespace
} // namespace moec
