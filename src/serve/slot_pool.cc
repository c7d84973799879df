#include "serve/slot_pool.h"

namespace dflash::serve {

SlotPool::SlotPool(Engine& engine, int slots, int saved) : engine_(engine) {
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
  const int reuse = engine_.ReusablePrefix(slot.seq, prompt);
  Slot* best = &saved_[0];
  int best_reuse = -1;
  for (Slot& s : saved_) {
    const int r = engine_.ReusablePrefix(s.seq, prompt);
    if (r > best_reuse) {
      best = &s;
      best_reuse = r;
    }
  }
  if (best_reuse <= reuse) {
    if (static_cast<int>(slot.seq.tokens.size()) <= reuse) return;  // nothing would be lost
    best = &saved_[0];  // keep the slot's sequence in place of the least recently used one
    for (Slot& s : saved_) {
      if (s.last_used < best->last_used) best = &s;
    }
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
      return Lease(this, s);
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

int SlotPool::busy() const {
  std::lock_guard<std::mutex> l(mu_);
  int n = 0;
  for (const auto& s : slots_) n += s->busy;
  return n;
}

int SlotPool::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return queued_;
}

}  // namespace dflash::serve
