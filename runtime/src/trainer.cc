#include "slrt/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "slrt/bfloat16.h"
#include "slrt/dtype.h"
#include "slrt/error.h"
#include "slrt/mapped_file.h"

namespace slrt {
namespace {

using Clock = std::chrono::steady_clock;

const sl::schedule::Buffer &bufferOf(const sl::schedule::Schedule &schedule,
                                     const sl::schedule::Binding &binding) {
  return schedule.buffers(static_cast<int>(binding.buffer()));
}

const sl::schedule::Binding *
findBinding(const google::protobuf::RepeatedPtrField<sl::schedule::Binding> &bindings,
            const std::string &name) {
  for (const sl::schedule::Binding &binding : bindings)
    if (binding.name() == name)
      return &binding;
  return nullptr;
}

std::string typeText(DType dtype, const Shape &shape) {
  return dtypeName(dtype) + " " + formatShape(shape);
}

// The vocabulary TokenData::batch checks ids against when the user gave none: every id the token
// type can hold passes.
int64_t uncheckedVocabulary(TokenDType dtype) {
  return dtype == TokenDType::U16 ? int64_t{1} << 16 : int64_t{1} << 32;
}

// The vocabulary of the schedule's loss: the last dimension of the logits of its CROSS_ENTROPY
// kernels (the smallest, should they differ), or 0 without one.
int64_t scheduleVocabulary(const sl::schedule::Schedule &s) {
  int64_t vocab = 0;
  for (const sl::schedule::Kernel &kernel : s.kernels()) {
    if (kernel.op() != sl::schedule::CROSS_ENTROPY || kernel.operands_size() == 0)
      continue;
    const sl::schedule::Buffer &logits = s.buffers(static_cast<int>(kernel.operands(0)));
    if (logits.shape_size() == 0)
      continue;
    int64_t v = logits.shape(logits.shape_size() - 1);
    if (v > 0 && (vocab == 0 || v < vocab))
      vocab = v;
  }
  return vocab;
}

// "NaN" whatever its sign bit, or "inf" / "-inf", for messages.
std::string nonFiniteText(float value) {
  return std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf";
}

} // namespace

void checkTrainSchedule(const sl::schedule::Schedule &s) {
  auto fail = [&](const auto &...parts) { return makeError("not a train schedule: ", parts...); };
  if (s.kind() != kTrainKind)
    throw fail("its kind is '", s.kind(), "', not '", kTrainKind, "'");

  Shape batchShape;
  for (const char *name : {kInputIdsName, kLabelsName}) {
    const sl::schedule::Binding *binding = findBinding(s.inputs(), name);
    if (!binding)
      throw fail("it has no input '", name, "'");
    const sl::schedule::Buffer &b = bufferOf(s, *binding);
    Shape shape = toShape(b.shape());
    if (b.dtype() != sl::schedule::I64 || shape.size() != 2 || shape[0] <= 0 || shape[1] <= 0)
      throw fail("input '", name, "' is ", typeText(b.dtype(), shape),
                 ", not i64 [batch, seq] with both positive");
    if (!batchShape.empty() && shape != batchShape)
      throw fail("input '", kLabelsName, "' is ", formatShape(shape), " but '", kInputIdsName,
                 "' is ", formatShape(batchShape));
    batchShape = shape;
  }
  for (const sl::schedule::Binding &binding : s.inputs())
    if (binding.name() != kInputIdsName && binding.name() != kLabelsName)
      throw fail("it has input '", binding.name(), "', but a train step takes only '",
                 kInputIdsName, "' and '", kLabelsName, "'");

  const sl::schedule::Binding *loss = findBinding(s.outputs(), kLossName);
  if (!loss)
    throw fail("it has no output '", kLossName, "'");
  const sl::schedule::Buffer &lossBuffer = bufferOf(s, *loss);
  if (lossBuffer.dtype() != sl::schedule::F32 || lossBuffer.shape_size() != 0)
    throw fail("output '", kLossName, "' is ",
               typeText(lossBuffer.dtype(), toShape(lossBuffer.shape())), ", not f32 []");

  if (s.parameters_size() == 0)
    throw fail("it has no parameters to train");
  std::set<std::string> names;
  for (const sl::schedule::Shard &shard : s.shards()) {
    // The verifier has checked the shard itself: f32 [elements / world] in the host pool.
    std::string gradName = kGradShardPrefix + shard.name();
    const sl::schedule::Binding *grad = findBinding(s.outputs(), gradName);
    if (!grad)
      throw fail("it has no output '", gradName, "' (the gradient of shard '", shard.name(), "')");
    const sl::schedule::Buffer &b = bufferOf(s, *grad);
    const sl::schedule::Buffer &own = s.buffers(static_cast<int>(shard.buffer()));
    if (b.dtype() != own.dtype() || toShape(b.shape()) != toShape(own.shape()))
      throw fail("output '", gradName, "' is ", typeText(b.dtype(), toShape(b.shape())),
                 ", but shard '", shard.name(), "' is ", typeText(own.dtype(), toShape(own.shape())));
  }
  for (const sl::schedule::Parameter &p : s.parameters()) {
    Shape shape = toShape(p.shape());
    if (!names.insert(p.name()).second)
      throw fail("parameter '", p.name(), "' is listed twice");
    if (p.dtype() != sl::schedule::F32 && p.dtype() != sl::schedule::BF16)
      throw makeError("parameter '", p.name(), "' is ", typeText(p.dtype(), shape),
                      ": only f32 or bf16 parameters can be trained (AdamW keeps f32 master "
                      "weights)");
    if (s.world() > 1)
      continue; // its gradient is in its shard's (f32 shards only: the verifier)

    std::string gradName = kGradPrefix + p.name();
    const sl::schedule::Binding *grad = findBinding(s.outputs(), gradName);
    if (!grad)
      throw fail("it has no output '", gradName, "' (the gradient of parameter '", p.name(), "')");
    const sl::schedule::Buffer &b = bufferOf(s, *grad);
    // A bf16 parameter's gradient is bf16, or f32 when the step accumulates it in f32.
    bool dtypeFits = b.dtype() == p.dtype() ||
                     (p.dtype() == sl::schedule::BF16 && b.dtype() == sl::schedule::F32);
    if (!dtypeFits || toShape(b.shape()) != shape)
      throw fail("output '", gradName, "' is ", typeText(b.dtype(), toShape(b.shape())),
                 ", but parameter '", p.name(), "' is ", typeText(p.dtype(), shape));
  }
}

std::string modelFingerprint(const sl::schedule::Schedule &schedule) {
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](const void *bytes, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      hash ^= static_cast<const unsigned char *>(bytes)[i];
      hash *= 0x100000001b3ull;
    }
  };
  auto mixNumber = [&](int64_t value) { mix(&value, sizeof value); };
  uint64_t values = 0;
  for (const sl::schedule::Parameter &p : schedule.parameters()) {
    // Lengths first, so that no two lists of names and shapes hash the same bytes.
    mixNumber(static_cast<int64_t>(p.name().size()));
    mix(p.name().data(), p.name().size());
    mixNumber(p.dtype());
    mixNumber(p.shape_size());
    for (int64_t dim : p.shape())
      mixNumber(dim);
    values += numel(toShape(p.shape())).value_or(0);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::to_string(schedule.parameters_size()) + " parameters, " + std::to_string(values) +
         " values, fnv1a64 " + hex;
}

Trainer::Trainer(const LoadedSchedule &schedule, Backend &backend, const TokenData &data,
                 const TrainerOptions &options)
    : schedule_(schedule), data_(data), options_(options), optimizer_(options.adamw) {
  const sl::schedule::Schedule &s = schedule_.schedule;
  try {
    checkTrainSchedule(s);
  } catch (const Error &e) {
    throw makeError(schedule_.path, ": ", e.what());
  }
  if (options_.vocabSize < 0)
    throw makeError("the vocabulary size must not be negative, got ", options_.vocabSize);
  Shape shape = toShape(bufferOf(s, *findBinding(s.inputs(), kInputIdsName)).shape());
  batchSize_ = shape[0];
  seqLen_ = shape[1];
  world_ = std::max<uint32_t>(1, s.world());
  // Every rank reads its rows of the W * b sequences of a step.
  data_.checkFits(batchSize_ * world_, seqLen_);
  fingerprint_ = modelFingerprint(s);

  int64_t modelVocab = scheduleVocabulary(s);
  if (options_.vocabSize > 0 && modelVocab > 0 && options_.vocabSize > modelVocab)
    throw makeError("the vocabulary size ", options_.vocabSize, " is larger than the model's, ",
                    modelVocab, " (the last dimension of the logits its loss reads)");
  vocab_ = options_.vocabSize > 0 ? options_.vocabSize : modelVocab;

  executor_ = std::make_unique<Executor>(schedule_, backend, options_.executor);
  // The parameters read from an f32 model file into bf16 buffers start their masters from the
  // file's f32 values, not from the rounded buffers.
  std::map<std::string, MappedFile> files;
  auto add = [&](const std::string &name, const TensorRef &ref, const std::string &gradName,
                 const std::string &where, const Shape &shape,
                 const sl::schedule::Parameter *parameter) {
    std::vector<float> weights(ref.bytes / dtypeSize(ref.dtype));
    if (ref.dtype == sl::schedule::F32) {
      std::memcpy(weights.data(), ref.data, ref.bytes);
    } else if (parameter && parameter->file_dtype() == sl::schedule::F32 &&
               !options_.executor.randomWeightsSeed) {
      MappedFile &file = files[where];
      if (!file.data())
        file = MappedFile::open(where, "model file");
      // loadSchedule checked the range; the file may have changed since.
      if (parameter->file_offset() > file.size() ||
          parameter->bytes() > file.size() - parameter->file_offset() ||
          parameter->bytes() != weights.size() * sizeof(float))
        throw makeError(where, ": parameter '", name, "' no longer fits the file (it changed "
                               "after the schedule was loaded)");
      std::memcpy(weights.data(), file.data() + parameter->file_offset(), parameter->bytes());
    } else {
      // bf16 in the file, or random weights: the buffer holds the exact values.
      widenBfloat16(reinterpret_cast<const uint16_t *>(ref.data), weights.data(), weights.size());
    }
    // The executor refused NaN; an infinite weight cannot be trained either (its update is NaN).
    if (std::optional<NonFinite> bad =
            findNonFinite(weights.data(), weights.size(), sl::schedule::F32))
      throw makeError(where, ": parameter '", name, "' holds ", bad->text, " at element ",
                      bad->index, " of its f32 ", formatShape(shape),
                      ": a trained parameter must be finite");
    optimizer_.addParameter(name, std::move(weights));
    targets_.push_back(&ref);
    grads_.push_back(&executor_->outputBuffer(gradName));
  };
  if (world_ > 1)
    for (int i = 0; i < s.shards_size(); ++i)
      add(s.shards(i).name(), executor_->shardBuffer(i), kGradShardPrefix + s.shards(i).name(),
          "shard", Shape{int64_t(executor_->shardBuffer(i).bytes / sizeof(float))}, nullptr);
  else
    for (int i = 0; i < s.parameters_size(); ++i)
      add(s.parameters(i).name(), executor_->parameterBuffer(i),
          kGradPrefix + s.parameters(i).name(), schedule_.parameterFiles[static_cast<size_t>(i)],
          toShape(s.parameters(i).shape()), &s.parameters(i));
  files.clear();

  // The verifier lets no parameter (shard) appear in two OPTIMIZER_STEPs, so counting them tells
  // whether every one is stepped in the schedule.
  size_t stepped = 0;
  for (const sl::schedule::Kernel &kernel : s.kernels())
    if (kernel.op() == sl::schedule::OPTIMIZER_STEP)
      stepped += static_cast<size_t>(world_ > 1 ? kernel.optimizer_step().shards_size()
                                                : kernel.optimizer_step().parameters_size());
  overlapped_ = stepped == optimizer_.parameterCount() && options_.adamw.maxGradNorm == 0;
  if (overlapped_)
    executor_->setOptimizerStepHook(
        [this](const sl::schedule::Kernel &kernel) { optimizerStep(kernel); });
}

void Trainer::refuseIfPartlyApplied(const char *action) const {
  if (!partlyApplied_.empty())
    throw makeError("cannot ", action, ": ", partlyApplied_);
}

void Trainer::optimizerStep(const sl::schedule::Kernel &kernel) {
  if (!lossChecked_) {
    float loss;
    std::memcpy(&loss, executor_->outputBuffer(kLossName).data, sizeof(float));
    if (!std::isfinite(loss))
      throw makeError("the loss is ", nonFiniteText(loss),
                      "; training stopped before this step's update");
    lossChecked_ = true;
  }
  std::vector<ParamGrad> group;
  const auto &indices = world_ > 1 ? kernel.optimizer_step().shards()
                                   : kernel.optimizer_step().parameters();
  for (uint32_t index : indices)
    group.push_back(stepOf(index));
  // Every gradient of the group is checked before any of its parameters moves.
  std::vector<double> squares = optimizer_.gradSquaredNorms(group);
  for (size_t k = 0; k < group.size(); ++k) {
    if (!std::isfinite(squares[k]))
      throw makeError("the gradient of ", describe(group[k].param), " holds NaN or infinite values",
                      parametersUpdated_ == 0 ? "; training stopped before this step's update"
                                              : "");
    squares_[group[k].param] = squares[k];
  }
  optimizer_.stepGroup(group);
  parametersUpdated_ += group.size();
}

ParamGrad Trainer::stepOf(size_t index) const {
  ParamGrad pg{index};
  const TensorRef &grad = *grads_[index];
  if (grad.dtype == sl::schedule::F32)
    pg.grad = reinterpret_cast<const float *>(grad.data);
  else
    pg.bf16Grad = reinterpret_cast<const uint16_t *>(grad.data);
  const TensorRef &target = *targets_[index];
  if (target.dtype == sl::schedule::BF16)
    pg.bf16WeightsOut = reinterpret_cast<uint16_t *>(target.data);
  else
    pg.weightsOut = reinterpret_cast<float *>(target.data);
  return pg;
}

void Trainer::writeWeights(size_t index) {
  const std::vector<float> &weights = optimizer_.weights(index);
  const TensorRef &target = *targets_[index];
  if (target.dtype == sl::schedule::BF16)
    roundToBfloat16(weights.data(), reinterpret_cast<uint16_t *>(target.data), weights.size());
  else
    std::memcpy(target.data, weights.data(), weights.size() * sizeof(float));
}

std::vector<const float *> Trainer::masterWeights() const {
  std::vector<const float *> weights;
  for (size_t i = 0; i < optimizer_.parameterCount(); ++i)
    weights.push_back(optimizer_.weights(i).data());
  return weights;
}

std::string Trainer::describe(size_t index) const {
  return (world_ > 1 ? "shard '" : "parameter '") + optimizer_.name(index) + "'" +
         (world_ > 1 ? " (this rank's part)" : "");
}

ShardedLayout Trainer::shardedLayout() const {
  const sl::schedule::Schedule &s = schedule_.schedule;
  ShardedLayout layout;
  layout.world = world_;
  for (const sl::schedule::Shard &shard : s.shards())
    layout.shards.push_back({shard.name(), shard.elements()});
  for (const sl::schedule::Parameter &p : s.parameters())
    layout.parameters.push_back({p.name(), toShape(p.shape()), p.shard(), p.shard_offset()});
  return layout;
}

uint64_t Trainer::optimizerStateBytes() const {
  uint64_t bytes = 0;
  for (size_t i = 0; i < optimizer_.parameterCount(); ++i)
    bytes += (optimizer_.weights(i).capacity() + optimizer_.expAvg(i).capacity() +
              optimizer_.expAvgSq(i).capacity()) *
             sizeof(float);
  return bytes;
}

uint64_t Trainer::resume(const std::string &path) {
  refuseIfPartlyApplied("resume");
  if (completedSteps() != firstStep_ || !history_.empty())
    throw makeError(path, ": cannot resume a trainer that has already stepped");
  const sl::schedule::Schedule &s = schedule_.schedule;
  TrainingCheckpoint checkpoint;
  if (world_ > 1) {
    checkpoint = loadShardedCheckpoint(path, fingerprint_, shardedLayout(),
                                       static_cast<uint32_t>(rank()));
  } else {
    if (isShardedCheckpointIndex(path)) {
      uint32_t saved = shardedCheckpointWorld(path);
      throw makeError(path, ": this is the index of a checkpoint sharded over ", saved,
                      " ranks (world ", saved, "), and this run has one rank (world 1): resume "
                      "with ", saved, " ranks, or consolidate it for a run of one rank (sl-run "
                      "SCHEDULE --consolidate INDEX --save FILE)");
    }
    std::vector<ParameterSpec> specs;
    for (const sl::schedule::Parameter &p : s.parameters())
      specs.push_back({p.name(), toShape(p.shape())});
    checkpoint = loadCheckpoint(path, fingerprint_, specs);
  }
  if (checkpoint.step > static_cast<uint64_t>(INT64_MAX))
    throw makeError(path, ": step ", checkpoint.step, " is out of range");
  for (size_t i = 0; i < checkpoint.parameters.size(); ++i) {
    ParameterState &state = checkpoint.parameters[i];
    optimizer_.setWeights(i, state.master);
    optimizer_.setExpAvg(i, state.adamM);
    optimizer_.setExpAvgSq(i, state.adamV);
    // Free each parameter's copies once the optimizer holds them: peak memory stays near one.
    state = ParameterState();
  }
  optimizer_.setStep(static_cast<int64_t>(checkpoint.step));
  firstStep_ = checkpoint.step;
  writeWeights();
  resumedFrom_ = path;
  return checkpoint.dataPosition;
}

uint64_t Trainer::dataPosition() const {
  uint64_t n = data_.numTokens();
  uint64_t perStep = static_cast<uint64_t>(batchSize_) * world_ * static_cast<uint64_t>(seqLen_);
  return static_cast<uint64_t>(static_cast<unsigned __int128>(completedSteps() % n) *
                               (perStep % n) % n);
}

void Trainer::writeWeights() {
  for (size_t i = 0; i < optimizer_.parameterCount(); ++i)
    writeWeights(i);
}

StepRecord Trainer::step() {
  refuseIfPartlyApplied("step");
  auto start = Clock::now();
  uint64_t completed = completedSteps();
  StepRecord record;
  record.step = completed + 1;
  record.lr = optimizer_.currentLr();
  try {
    int64_t vocab = vocab_ > 0 ? vocab_ : uncheckedVocabulary(data_.dtype());
    TokenBatch batch =
        world_ > 1 ? data_.batchRows(completed, batchSize_ * world_, seqLen_, vocab,
                                     static_cast<int64_t>(rank()) * batchSize_, batchSize_)
                   : data_.batch(completed, batchSize_, seqLen_, vocab);
    lossChecked_ = false;
    squares_.assign(optimizer_.parameterCount(), 0.0);
    parametersUpdated_ = 0;
    try {
      executor_->execute(
          {{kInputIdsName, std::move(batch.inputs)}, {kLabelsName, std::move(batch.labels)}});
    } catch (const std::exception &e) {
      // Whatever failed (a kernel, a gradient, memory), updated groups cannot be taken back.
      if (parametersUpdated_ == 0)
        throw;
      partlyApplied_ = "step " + std::to_string(record.step) + " was partly applied (" +
                       std::to_string(parametersUpdated_) + " of " +
                       std::to_string(optimizer_.parameterCount()) +
                       (world_ > 1 ? " of this rank's shards" : " parameters") +
                       " were updated before it failed), so the weights in memory mix "
                       "two steps; the last saved checkpoint is intact: resume from it";
      throw makeError(e.what(), "; ", partlyApplied_);
    }
    const RunStats &stats = executor_->stats();
    record.bytesHostToDevice = stats.bytesHostToDevice;
    record.bytesDeviceToHost = stats.bytesDeviceToHost;
    record.bytesCollective = stats.bytesCollective;

    std::memcpy(&record.loss, executor_->outputBuffer(kLossName).data, sizeof(float));
    // With several ranks: the mean of their losses and the sum of their squared gradient norms,
    // the same on every rank. The sum of the ranks' parts' squares is the whole gradient's.
    auto overRanks = [&](double &squares) {
      if (world_ == 1)
        return;
      double values[2] = {static_cast<double>(record.loss), squares};
      options_.executor.comm->allReduceSum(
          values, 2, "step " + std::to_string(record.step) + ": the loss and gradient norm");
      record.loss = static_cast<float>(values[0] / world_);
      squares = values[1];
    };

    if (overlapped_) {
      // Every parameter was stepped, and its weights written, inside the run.
      double squares = 0;
      for (double square : squares_)
        squares += square;
      overRanks(squares);
      if (!std::isfinite(record.loss))
        throw makeError("the loss is ", nonFiniteText(record.loss),
                        "; training stopped before this step's update");
      record.gradNorm = std::sqrt(squares);
      optimizer_.finishStep();
    } else {
      // Each parameter's squares on its own, to name a non-finite gradient; summed in parameter
      // order they are exactly the sum AdamW::step clips with.
      std::vector<ParamGrad> grads;
      double squares = 0;
      if (std::isfinite(record.loss)) {
        for (size_t i = 0; i < optimizer_.parameterCount(); ++i)
          grads.push_back(stepOf(i));
        std::vector<double> each = optimizer_.gradSquaredNorms(grads);
        for (size_t i = 0; i < each.size(); ++i) {
          if (!std::isfinite(each[i]))
            throw makeError("the gradient of ", describe(i),
                            " holds NaN or infinite values; training stopped before this step's "
                            "update");
          squares += each[i];
        }
      }
      overRanks(squares);
      if (!std::isfinite(record.loss))
        throw makeError("the loss is ", nonFiniteText(record.loss),
                        "; training stopped before this step's update");
      record.gradNorm = std::sqrt(squares);
      optimizer_.stepGroup(grads, optimizer_.clipCoefficient(squares));
      optimizer_.finishStep();
    }
  } catch (const Error &e) {
    throw makeError("step ", record.step, ": ", e.what());
  }
  record.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  record.tokensPerSecond =
      record.seconds > 0 ? static_cast<double>(batchSize_ * world_ * seqLen_) / record.seconds
                         : 0;
  history_.push_back(record);
  return record;
}

TrainingCheckpoint Trainer::checkpoint() const {
  refuseIfPartlyApplied("make a checkpoint");
  TrainingCheckpoint checkpoint;
  checkpoint.step = completedSteps();
  checkpoint.modelFingerprint = fingerprint_;
  checkpoint.dataPosition = dataPosition();
  checkpoint.rank = static_cast<uint32_t>(rank());
  checkpoint.world = world_;
  for (size_t i = 0; i < optimizer_.parameterCount(); ++i)
    checkpoint.parameters.push_back({optimizer_.name(i), targets_[i]->shape,
                                     optimizer_.weights(i), optimizer_.expAvg(i),
                                     optimizer_.expAvgSq(i)});
  return checkpoint;
}

void Trainer::save(const std::string &path) {
  refuseIfPartlyApplied(("save " + path).c_str());
  if (world_ > 1)
    saveShardedCheckpoint(path, checkpoint(), shardedLayout(), *options_.executor.comm);
  else
    saveCheckpoint(path, checkpoint());
  savedTo_ = path;
}

nlohmann::json Trainer::report() const {
  nlohmann::json loss = nlohmann::json::array(), lr = nlohmann::json::array(),
                 gradNorm = nlohmann::json::array(), stepSeconds = nlohmann::json::array();
  nlohmann::json toDevice = nlohmann::json::array(), toHost = nlohmann::json::array(),
                 collective = nlohmann::json::array();
  double seconds = 0;
  for (const StepRecord &r : history_) {
    toDevice.push_back(r.bytesHostToDevice);
    toHost.push_back(r.bytesDeviceToHost);
    collective.push_back(r.bytesCollective);
    loss.push_back(r.loss);
    lr.push_back(r.lr);
    gradNorm.push_back(r.gradNorm);
    stepSeconds.push_back(r.seconds);
    seconds += r.seconds;
  }
  int64_t tokensPerStep = batchSize_ * world_ * seqLen_;
  double tokens = static_cast<double>(tokensPerStep) * static_cast<double>(history_.size());
  auto pathOrNull = [](const std::string &path) {
    return path.empty() ? nlohmann::json(nullptr) : nlohmann::json(path);
  };
  const AdamWConfig &c = optimizer_.config();
  return {
      {"first_step", firstStep_},
      {"steps", history_.size()},
      {"batch_size", batchSize_},
      {"seq_len", seqLen_},
      {"tokens_per_step", tokensPerStep},
      {"losses", loss},
      {"lrs", lr},
      {"grad_norms", gradNorm},
      {"step_seconds", stepSeconds},
      {"seconds", seconds},
      {"tokens_per_second", seconds > 0 ? tokens / seconds : 0.0},
      {"fingerprint", fingerprint_},
      {"data",
       {{"path", data_.path()},
        {"dtype", tokenDTypeName(data_.dtype())},
        {"tokens", data_.numTokens()}}},
      {"vocab_size", vocab_ > 0 ? nlohmann::json(vocab_) : nlohmann::json(nullptr)},
      {"resumed_from", pathOrNull(resumedFrom_)},
      {"saved_to", pathOrNull(savedTo_)},
      {"adamw",
       {{"lr", c.lr},
        {"beta1", c.beta1},
        {"beta2", c.beta2},
        {"eps", c.eps},
        {"weight_decay", c.weightDecay},
        {"max_grad_norm", c.maxGradNorm},
        {"warmup_steps", c.warmupSteps},
        {"decay_steps", c.decaySteps},
        {"min_lr", c.minLr}}},
      {"optimizer_overlapped", overlapped_},
      {"world", world_},
      {"optimizer_state_bytes", optimizerStateBytes()},
      {"bytes_host_to_device", toDevice},
      {"bytes_device_to_host", toHost},
      {"bytes_collective", collective},
  };
}

} // namespace slrt
