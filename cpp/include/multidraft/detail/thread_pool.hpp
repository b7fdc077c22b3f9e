// The process-wide thread pool of batched calls. parallel_for(rows, body, min_rows) cuts
// [0, rows) into contiguous chunks, one per thread but none under min_rows rows (the calling
// thread works too), runs body(begin, end) on each and returns when all are done. The cut
// depends only on rows, min_rows and the thread count, and every row of a batch is computed from
// its own inputs and seed, so results do not depend on the thread count or on which thread ran
// a chunk; a body keeps its scratch per chunk.
//
// Errors: a chunk that throws stops the chunks not started yet, and the caller rethrows the
// exception of the lowest failing chunk, i.e. of the first bad row, as a serial loop would.
// Several threads may submit batches at once: chunks are claimed in submission order, and a
// caller runs its own unclaimed chunks itself, so a batch never waits for another one to end.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif

namespace multidraft {

class ThreadPool {
 public:
  // More threads than this is a mistake (each one is an OS thread), not a request to honour.
  static constexpr int kMaxThreads = 1024;

  // The one pool of the process. Never destroyed: parked workers are simply ended with the
  // process, which a destructor run after the interpreter's shutdown could not join safely.
  static ThreadPool& global() {
    static ThreadPool* const pool = new ThreadPool();
    return *pool;
  }

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads a batch is spread over, the calling thread included.
  int threads() const { return threads_.load(std::memory_order_relaxed); }

  // Workers are started on the first batch that needs them; surplus workers end here.
  void set_threads(int count) {
    if (count < 1 || count > kMaxThreads)
      throw std::invalid_argument("the number of threads must be between 1 and " + std::to_string(kMaxThreads) +
                                  ", got " + std::to_string(count));
    std::lock_guard<std::mutex> resizing(resize_mutex_);
    std::vector<std::thread> leaving;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      threads_.store(count, std::memory_order_relaxed);
      wanted_workers_ = count - 1;
      if (workers_.size() > static_cast<std::size_t>(wanted_workers_)) {
        leaving.assign(std::make_move_iterator(workers_.begin() + wanted_workers_),
                       std::make_move_iterator(workers_.end()));
        workers_.resize(static_cast<std::size_t>(wanted_workers_));
      }
    }
    work_.notify_all();
    for (std::thread& worker : leaving) worker.join();  // each finishes its current chunk first
  }

  // min_rows: the fewest rows worth a chunk, where waking a worker would cost more than the
  // rows it takes over. balanced: rows of uneven, heavy cost (a max-flow, a Newton solve) are cut
  // into one chunk per row, handed out in order to whichever thread is free, so one slow row does
  // not leave the other threads idle behind a fixed half of the batch.
  template <class Body>
  void parallel_for(std::int64_t rows, Body&& body, std::int64_t min_rows = 1, bool balanced = false) {
    if (rows <= 0) return;
    const int count = threads();
    const std::int64_t chunks =
        count == 1 ? 1 : std::clamp<std::int64_t>(rows / std::max<std::int64_t>(min_rows, 1), 1, balanced ? rows : count);
    if (chunks == 1) {  // inline: no lock, no queue
      body(std::int64_t{0}, rows);
      return;
    }
    using Callable = std::remove_reference_t<Body>;
    Job job;
    job.run = [](void* callable, std::int64_t begin, std::int64_t end) { (*static_cast<Callable*>(callable))(begin, end); };
    job.body = const_cast<void*>(static_cast<const void*>(&body));
    job.rows = rows;
    job.chunks = job.end = chunks;
    std::unique_lock<std::mutex> lock(mutex_);
    start_workers();
    jobs_.push_back(&job);
    work_.notify_all();
    for (std::int64_t chunk; (chunk = claim(job)) >= 0;) run_chunk(job, chunk, lock);
    done_.wait(lock, [&] { return job.finished == job.end; });
    lock.unlock();
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  // One submitted batch; it lives on its caller's stack until all its chunks are finished.
  struct Job {
    void (*run)(void* body, std::int64_t begin, std::int64_t end) = nullptr;
    void* body = nullptr;
    std::int64_t rows = 0, chunks = 0;
    std::int64_t claimed = 0;   // chunks handed out, in order
    std::int64_t end = 0;       // chunks that will run: all, or those claimed before an error
    std::int64_t finished = 0;
    std::int64_t failed_chunk = 0;
    std::exception_ptr error;   // of the lowest failing chunk
  };

  ThreadPool() {
    const unsigned cores = std::thread::hardware_concurrency();
    threads_.store(static_cast<int>(std::clamp(cores, 1u, static_cast<unsigned>(kMaxThreads))));
    wanted_workers_ = threads() - 1;
#if defined(__unix__) || defined(__APPLE__)
    pthread_atfork(nullptr, nullptr, [] { global().forget_threads_after_fork(); });
#endif
  }

  // A forked child has only the thread that forked: the workers, and any batch another thread
  // was running, exist in the parent only. Their handles are dropped without a join (leaked, as
  // is any state a lost thread held locked) and the pool starts afresh, starting new workers on
  // the child's first batch.
  void forget_threads_after_fork() {
    new (&workers_) std::vector<std::thread>();
    new (&jobs_) std::vector<Job*>();
    new (&mutex_) std::mutex();
    new (&resize_mutex_) std::mutex();
    new (&work_) std::condition_variable();
    new (&done_) std::condition_variable();
  }

  // Under mutex_.
  void start_workers() {
    while (workers_.size() < static_cast<std::size_t>(wanted_workers_)) {
      const int index = static_cast<int>(workers_.size());
      workers_.emplace_back([this, index] { work(index); });
    }
  }

  void work(int index) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      work_.wait(lock, [&] { return index >= wanted_workers_ || !jobs_.empty(); });
      if (index >= wanted_workers_) return;
      Job& job = *jobs_.front();
      run_chunk(job, claim(job), lock);
    }
  }

  static std::int64_t chunk_begin(const Job& job, std::int64_t chunk) {
    return job.rows / job.chunks * chunk + std::min(chunk, job.rows % job.chunks);
  }

  // Under mutex_: the next chunk of `job`, or -1 when all are handed out.
  std::int64_t claim(Job& job) {
    if (job.claimed == job.end) return -1;
    const std::int64_t chunk = job.claimed++;
    if (job.claimed == job.end) jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
    return chunk;
  }

  // Called and returns under mutex_ (held by `lock`), which is released while the chunk runs.
  void run_chunk(Job& job, std::int64_t chunk, std::unique_lock<std::mutex>& lock) {
    lock.unlock();
    std::exception_ptr error;
    try {
      job.run(job.body, chunk_begin(job, chunk), chunk_begin(job, chunk + 1));
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      if (!job.error || chunk < job.failed_chunk) {
        job.error = error;
        job.failed_chunk = chunk;
      }
      if (job.claimed < job.end) {  // the rest would only be thrown away
        jobs_.erase(std::find(jobs_.begin(), jobs_.end(), &job));
        job.end = job.claimed;
      }
    }
    if (++job.finished == job.end) done_.notify_all();
  }

  std::atomic<int> threads_{1};
  int wanted_workers_ = 0;           // under mutex_
  std::vector<std::thread> workers_;  // under mutex_; worker i ends when i >= wanted_workers_
  std::vector<Job*> jobs_;            // under mutex_: jobs with chunks not handed out, oldest first
  std::mutex mutex_;
  std::mutex resize_mutex_;  // one set_threads at a time: ending workers are joined outside mutex_
  std::condition_variable work_, done_;
};

}  // namespace multidraft
