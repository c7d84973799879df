// The server's sequences ("slots") and the queue in front of them. Each slot keeps the tokens
// of its last request in its caches, so it doubles as the prefix cache: a new request takes the
// idle slot whose tokens share the longest prefix with its prompt (agents resend the whole
// conversation every turn), and among equals the least recently used one.
//
// Saved sequences (--cache-ram) extend that cache. The longest reusable prefix among the
// slot's sequence and the saved ones wins: a saved sequence that shares more with the request
// is swapped into the slot (the slot's sequence takes its place in the saved set). When the
// slot's own sequence wins but the request would overwrite part of it, it is swapped into the
// saved set in place of the least recently used saved one, whose storage the slot then reuses,
// only if that keeps more tokens than the request loses (a new conversation is saved; a
// regenerated or forked reply keeps its prefix in the slot).
// Swaps exchange buffers: nothing is copied.
//
// A disk tier (DiskCache, --cache-dir) extends it further: once a request has its slot, a saved
// file sharing a longer prefix than the slot's sequence is loaded into the slot. A slot's
// sequence is written to disk before a request overwrites most of it (what the RAM tier is
// about to lose), and every sequence at shutdown (SaveAll).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "serve/disk_cache.h"
#include "spec/engine.h"

namespace dflash::serve {

struct Slot {
  int id = 0;
  Sequence seq;
  bool busy = false;
  uint64_t last_used = 0;
  // Whether the current request's reused prefix came from the disk tier, and the time the disk
  // tier took for it (saving the slot's old sequence, loading a file).
  bool from_disk = false;
  double disk_ms = 0;
};

class SlotPool {
 public:
  using Clock = std::chrono::steady_clock;

  // `saved`: sequences kept beyond the slots (each the size of one slot's caches). `disk`
  // (nullptr: none) must outlive the pool.
  SlotPool(Engine& engine, int slots, int saved = 0, DiskCache* disk = nullptr);

  // A slot held by one request; released (and returned to the pool) when destroyed.
  class Lease {
   public:
    Lease(SlotPool* pool, Slot* slot) : pool_(pool), slot_(slot) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.slot_ = nullptr; }
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    Slot& slot() const { return *slot_; }

   private:
    SlotPool* pool_;
    Slot* slot_;
  };

  // Waits for an idle slot until `deadline`, calling `waiting` about every `tick` while it
  // waits (return false to give up: a client that left). nullopt when it gave up or timed out.
  std::optional<Lease> Acquire(std::span<const int32_t> prompt, Clock::time_point deadline,
                               std::chrono::milliseconds tick, const std::function<bool()>& waiting);

  // Writes every idle slot's and saved sequence to the disk tier (at shutdown).
  void SaveAll();

  int size() const { return static_cast<int>(slots_.size()); }
  int saved() const { return static_cast<int>(saved_.size()); }
  int busy() const;
  int queued() const;
  // One sequence's caches as allocated: the target's state (KV; a hybrid's recurrent state, its
  // rollback copy and row log, its checkpoints) and the draft context. Every slot and saved
  // sequence has this size; --cache-ram is divided by it.
  size_t sequence_bytes() const;

 private:
  Slot* PickIdle(std::span<const int32_t> prompt);  // with mu_ held
  void SwapWithSaved(Slot& slot, std::span<const int32_t> prompt);  // with mu_ held
  void UseDisk(Slot& slot, std::span<const int32_t> prompt);  // the slot leased, mu_ not held

  Engine& engine_;
  DiskCache* disk_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot> saved_;  // never busy; last_used orders eviction
  mutable std::mutex mu_;
  std::condition_variable idle_;
  uint64_t clock_ = 0;
  int queued_ = 0;
};

}  // namespace dflash::serve
