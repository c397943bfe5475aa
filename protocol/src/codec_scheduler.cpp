// The scheduler's messages (scheduler_messages.hpp) into and out of their schema structs,
// field for field; codec_write.cpp and codec_read.cpp call these for the envelope's body.

#include "codec_internal.hpp"

namespace sailor::protocol::detail {
namespace {

plan_request get(s::PlanRequest::Reader r) {
  plan_request v;
  v.request_id = r.getRequestId();
  v.reason = r.getReason();
  for (auto n : r.getNodes()) v.nodes.push_back(get_inventory(n));
  v.has_current = r.getHasCurrent();
  v.current = get_plan(r.getCurrent());
  for (auto x : r.getRules()) v.rules.push_back(placement_rule{x.getKind(), x.getNode(), x.getStage()});
  v.objective = list_of<std::string>(r.getObjective());
  v.model_layers = r.getModelLayers();
  return v;
}

iteration_telemetry get(s::IterationTelemetry::Reader r) {
  return iteration_telemetry{r.getPlanVersion(), r.getIteration(), r.getNode(),
                             r.getStage(),       r.getReplica(),   r.getMeasuredS(),
                             r.getComputeS(),    r.getWaitS(),     r.getAllReduceS(),
                             r.getPredictedS(),  r.getLoss()};
}

scheduler_request get(s::SchedulerRequest::Reader r) {
  return scheduler_request{r.getRequestId(), r.getKind(),  r.getNode(), r.getReason(),
                           r.getDeadlineMs(), r.getStage(), r.getKey(),  r.getValue()};
}

}  // namespace

void put_scheduler(s::Envelope::Body::Builder b, const plan_request& v) {
  auto x = b.initPlanRequest();
  x.setRequestId(v.request_id);
  x.setReason(v.reason);
  auto nodes = x.initNodes(static_cast<unsigned>(v.nodes.size()));
  for (unsigned i = 0; i < v.nodes.size(); ++i) put_inventory(nodes[i], v.nodes[i]);
  x.setHasCurrent(v.has_current);
  put_plan(x.initCurrent(), v.current);
  auto rules = x.initRules(static_cast<unsigned>(v.rules.size()));
  for (unsigned i = 0; i < v.rules.size(); ++i) {
    rules[i].setKind(v.rules[i].kind);
    rules[i].setNode(v.rules[i].node);
    rules[i].setStage(v.rules[i].stage);
  }
  auto objective = x.initObjective(static_cast<unsigned>(v.objective.size()));
  for (unsigned i = 0; i < v.objective.size(); ++i) objective.set(i, v.objective[i]);
  x.setModelLayers(v.model_layers);
}

void put_scheduler(s::Envelope::Body::Builder b, const plan_reply& v) {
  auto x = b.initPlanReply();
  x.setRequestId(v.request_id);
  x.setOk(v.ok);
  put_plan(x.initPlan(), v.plan);
  x.setError(v.error);
}

void put_scheduler(s::Envelope::Body::Builder b, const availability_event& v) {
  auto x = b.initAvailabilityEvent();
  x.setKind(v.kind);
  put_inventory(x.initNode(), v.node);
  x.setReason(v.reason);
  x.setDeadlineMs(v.deadline_ms);
}

void put_scheduler(s::Envelope::Body::Builder b, const iteration_telemetry& v) {
  auto x = b.initIterationTelemetry();
  x.setPlanVersion(v.plan_version);
  x.setIteration(v.iteration);
  x.setNode(v.node);
  x.setStage(v.stage);
  x.setReplica(v.replica);
  x.setMeasuredS(v.measured_s);
  x.setComputeS(v.compute_s);
  x.setWaitS(v.wait_s);
  x.setAllReduceS(v.all_reduce_s);
  x.setPredictedS(v.predicted_s);
  x.setLoss(v.loss);
}

void put_scheduler(s::Envelope::Body::Builder b, const plan_applied& v) {
  auto x = b.initPlanApplied();
  x.setPlanVersion(v.plan_version);
  put_plan(x.initPlan(), v.plan);
  x.setBy(v.by);
}

void put_scheduler(s::Envelope::Body::Builder b, const plan_refused& v) {
  auto x = b.initPlanRefused();
  x.setRequestId(v.request_id);
  x.setReason(v.reason);
}

void put_scheduler(s::Envelope::Body::Builder b, const replan_finished& v) {
  auto x = b.initReplanFinished();
  x.setPlanVersion(v.plan_version);
  x.setReason(v.reason);
  x.setRecoveryS(v.recovery_s);
}

void put_scheduler(s::Envelope::Body::Builder b, const scheduler_hello& v) {
  b.initSchedulerHello().setName(v.name);
}

void put_scheduler(s::Envelope::Body::Builder b, const scheduler_request& v) {
  auto x = b.initSchedulerRequest();
  x.setRequestId(v.request_id);
  x.setKind(v.kind);
  x.setNode(v.node);
  x.setReason(v.reason);
  x.setDeadlineMs(v.deadline_ms);
  x.setStage(v.stage);
  x.setKey(v.key);
  x.setValue(v.value);
}

void put_scheduler(s::Envelope::Body::Builder b, const scheduler_reply& v) {
  auto x = b.initSchedulerReply();
  x.setRequestId(v.request_id);
  x.setAccepted(v.accepted);
  x.setReason(v.reason);
}

std::optional<message> get_scheduler(s::Envelope::Body::Reader b) {
  using B = s::Envelope::Body;
  switch (b.which()) {
    case B::PLAN_REQUEST: return message{get(b.getPlanRequest())};
    case B::PLAN_REPLY: {
      auto x = b.getPlanReply();
      return message{plan_reply{x.getRequestId(), x.getOk(), get_plan(x.getPlan()), x.getError()}};
    }
    case B::AVAILABILITY_EVENT: {
      auto x = b.getAvailabilityEvent();
      return message{availability_event{x.getKind(), get_inventory(x.getNode()), x.getReason(),
                                        x.getDeadlineMs()}};
    }
    case B::ITERATION_TELEMETRY: return message{get(b.getIterationTelemetry())};
    case B::PLAN_APPLIED: {
      auto x = b.getPlanApplied();
      return message{plan_applied{x.getPlanVersion(), get_plan(x.getPlan()), x.getBy()}};
    }
    case B::PLAN_REFUSED: {
      auto x = b.getPlanRefused();
      return message{plan_refused{x.getRequestId(), x.getReason()}};
    }
    case B::REPLAN_FINISHED: {
      auto x = b.getReplanFinished();
      return message{replan_finished{x.getPlanVersion(), x.getReason(), x.getRecoveryS()}};
    }
    case B::SCHEDULER_HELLO: return message{scheduler_hello{b.getSchedulerHello().getName()}};
    case B::SCHEDULER_REQUEST: return message{get(b.getSchedulerRequest())};
    case B::SCHEDULER_REPLY: {
      auto x = b.getSchedulerReply();
      return message{scheduler_reply{x.getRequestId(), x.getAccepted(), x.getReason()}};
    }
    default: return std::nullopt;
  }
}

}  // namespace sailor::protocol::detail
