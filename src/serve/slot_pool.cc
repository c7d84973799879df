#include "serve/slot_pool.h"

#include <chrono>

namespace dflash::serve {

SlotPool::SlotPool(Engine& engine, int slots, int saved, DiskCache* disk) : engine_(engine), disk_(disk) {
  if (slots < 1) Fail("--parallel must be at least 1, got ", slots);
  for (int i = 0; i < saved; ++i) {
    saved_.emplace_back();
    saved_.back().seq = engine.NewSequence();
  }
  for (int i = 0; i < slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->id = i;
    s->seq = engine.NewSequence();
    slots_.push_back(std::move(s));
  }
}

SlotPool::Lease::~Lease() {
  if (!slot_) return;
  {
    std::lock_guard<std::mutex> l(pool_->mu_);
    slot_->busy = false;
    slot_->last_used = ++pool_->clock_;
  }
  pool_->idle_.notify_all();
}

Slot* SlotPool::PickIdle(std::span<const int32_t> prompt) {
  Slot* best = nullptr;
  int best_reuse = -1;
  for (const auto& s : slots_) {
    if (s->busy) continue;
    const int reuse = engine_.ReusablePrefix(s->seq, prompt);
    if (reuse > best_reuse || (reuse == best_reuse && s->last_used < best->last_used)) {
      best = s.get();
      best_reuse = reuse;
    }
  }
  return best;
}

void SlotPool::SwapWithSaved(Slot& slot, std::span<const int32_t> prompt) {
  if (saved_.empty()) return;
  const int in_slot = engine_.ReusablePrefix(slot.seq, prompt);
  Slot* best = nullptr;
  int best_reuse = in_slot;  // a saved sequence must beat the slot's own to be swapped in
  Slot* oldest = &saved_[0];
  for (Slot& s : saved_) {
    const int r = engine_.ReusablePrefix(s.seq, prompt);
    if (r > best_reuse) {
      best = &s;
      best_reuse = r;
    }
    if (s.last_used < oldest->last_used) oldest = &s;
  }
  if (!best) {
    // The slot's sequence serves this request best, and the request overwrites what follows the
    // shared prefix. Saving the whole sequence instead of the least recently used one keeps
    // those tokens but costs the request the reuse the slot had over that one: it is saved only
    // when it keeps more than it costs (a new conversation: yes; a regenerated or forked reply,
    // whose prompt is most of the sequence: no).
    const int kept = static_cast<int>(slot.seq.tokens.size()) - in_slot;
    const int cost = in_slot - engine_.ReusablePrefix(oldest->seq, prompt);
    if (kept <= cost) return;
    best = oldest;
  }
  std::swap(slot.seq, best->seq);
  best->last_used = ++clock_;
}

std::optional<SlotPool::Lease> SlotPool::Acquire(std::span<const int32_t> prompt, Clock::time_point deadline,
                                                 std::chrono::milliseconds tick,
                                                 const std::function<bool()>& waiting) {
  std::unique_lock<std::mutex> l(mu_);
  ++queued_;
  while (true) {
    if (Slot* s = PickIdle(prompt)) {
      SwapWithSaved(*s, prompt);
      s->busy = true;
      --queued_;
      Lease lease(this, s);
      if (disk_) {
        l.unlock();  // disk reads and writes hold up no other request
        UseDisk(*s, prompt);
      }
      return lease;
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    idle_.wait_until(l, std::min(deadline, now + tick));
    if (waiting && PickIdle(prompt) == nullptr) {
      l.unlock();
      const bool keep = waiting();
      l.lock();
      if (!keep) break;
    }
  }
  --queued_;
  return std::nullopt;
}

void SlotPool::UseDisk(Slot& slot, std::span<const int32_t> prompt) {
  const auto start = Clock::now();
  const int in_ram = engine_.ReusablePrefix(slot.seq, prompt);
  const DiskCache::Match m = disk_->Find(prompt);
  const bool load = m.common > in_ram;
  // The request overwrites the slot's sequence past in_ram (all of it when a file replaces
  // it): save it first when that loses more than it keeps, as for a new conversation; a
  // continued one keeps its prefix in RAM and is saved at shutdown.
  const int lost = static_cast<int>(slot.seq.tokens.size()) - (load ? 0 : in_ram);
  if (lost > (load ? 0 : in_ram)) disk_->Save(slot.seq);
  slot.from_disk = load && disk_->Load(m, slot.seq) && engine_.ReusablePrefix(slot.seq, prompt) > 0;
  slot.disk_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void SlotPool::SaveAll() {
  if (!disk_) return;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& s : slots_) {
    if (!s->busy) disk_->Save(s->seq);
  }
  for (const Slot& s : saved_) disk_->Save(s.seq);
}

int SlotPool::busy() const {
  std::lock_guard<std::mutex> l(mu_);
  int n = 0;
  for (const auto& s : slots_) n += s->busy;
  return n;
}

size_t SlotPool::sequence_bytes() const {
  const Sequence& seq = slots_[0]->seq;  // swaps exchange buffers of equal sizes: any one tells
  return seq.target->bytes() + seq.draft.bytes();
}

int SlotPool::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return queued_;
}

}  // namespace dflash::serve
