// Shared by the import tests (test_conversation_import*.cpp): the database folder
// (conversation_store_fixture.h) and a file in our format.
#pragma once

#include "conversation_store_fixture.h"

// moc reads this file and does not know raw strings: those here keep their quotes balanced and
// hold no backslash (else it finds no class and the test does not link).

// A file in our format: two conversations, one with branches (current_leaf on the older branch).
inline constexpr char kOurs[] = R"({
  "format": "cosmos-chat-conversations",
  "version": 1,
  "exported_at": "2025-01-02T03:04:05.000Z",
  "app": "Cosmos Chat 0.1.0",
  "conversations": [
    {
      "id": 17,
      "title": "Robots 🤖 and 机器人",
      "created_at": "2024-03-01T10:00:00.123Z",
      "updated_at": "2024-03-01T10:05:00.456Z",
      "current_leaf": 21,
      "messages": [
        {"id": 19, "parent_id": null, "role": "system", "content": "You are helpful.", "reasoning": "",
         "created_at": "2024-03-01T10:00:00.123Z", "meta": {}},
        {"id": 20, "parent_id": 19, "role": "user", "content": "Is the robot about to drop the cup?",
         "reasoning": "", "created_at": "2024-03-01T10:00:01.000Z", "meta": {}},
        {"id": 21, "parent_id": 20, "role": "assistant", "content": "No, the grip is firm.",
         "reasoning": "The gripper closes fully.", "created_at": "2024-03-01T10:00:05.000Z",
         "meta": {"stats": {"prompt_tokens": 12, "generated_tokens": 34, "ttft_s": 0.25, "decode_tok_per_s": 180.5,
                            "prefill_tok_per_s": 900},
                  "thoughtSeconds": 1.5, "raw": "<think>The gripper closes fully.</think>No, the grip is firm.",
                  "stopped": false, "model": "Cosmos-Reason1-7B", "precision": "bf16",
                  "sampling": {"temperature": 0.6, "top_k": 0, "top_p": 0.95, "min_p": 0, "repetition_penalty": 1.05,
                               "seed": 42, "max_new_tokens": 4096},
                  "future_key": [1, {"nested": null}]}},
        {"id": 25, "parent_id": 20, "role": "assistant", "content": "Yes — it is slipping.",
         "reasoning": "", "created_at": "2024-03-01T10:04:00.000Z",
         "meta": {"error": "stopped early", "stopped": true}},
        {"id": 26, "parent_id": 25, "role": "user", "content": "Why?", "created_at": "2024-03-01T10:05:00.456Z"},
        {"id": 30, "parent_id": 25, "role": "tool", "content": "[3, 4]"}
      ]
    },
    {"id": 18, "title": "", "created_at": "2024-02-01T00:00:00Z", "updated_at": "2024-02-01T00:00:00Z",
     "current_leaf": null, "messages": []}
  ]
})";
