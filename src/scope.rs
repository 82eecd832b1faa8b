//! What an agent credential may do: the team rules, pure. People's tokens keep their roles;
//! an agent acting through its own credential is scoped to its team:
//!
//! - a **worker** may look at (read, term_read, stream, state, wait on) its own session and
//!   agent, and `send_line_to_agent` to its team's leader(s); nothing else;
//! - a **leader** may in addition look at, type into (send_line, keys, talk, resize),
//!   `send_line_to_agent` to, start, stop and restart the sessions and agents of its own team,
//!   and lists show it its team only; with `may_merge = true` in its definition it may also
//!   merge, update and push its team's agents' branches;
//! - no agent credential may register, unregister, reset, change ownership, reload policies,
//!   read the audit log, kill, signal, run tasks, use the bridge API or follow the event bus.
//!
//! What is outside an agent's sight is answered as if it did not exist (`PTY_SESSION_NOT_FOUND`,
//! `AGENT_NOT_FOUND`), so an agent cannot probe other teams; what it sees but may not do is
//! `FORBIDDEN`. Each route declares its [`AgentAccess`] (`api::routes`).

use crate::actor::AgentIdentity;

/// What a route does, as far as agent credentials are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentAccess {
    /// No agent credential may call it.
    Never,
    /// Any agent; what it lists or resolves is filtered to what the agent may see.
    Filtered,
    /// Looking at one session or agent: get, read, term_read, stream, state, wait.
    Look,
    /// Typing into one session: send_line, keys, talk, resize.
    Type,
    /// Starting, stopping or restarting one agent.
    Control,
    /// `send_line_to_agent`: the resolved target is checked with [`decide`].
    SendToAgent,
    /// Landing an agent's work (merge, update, push): a leader with `may_merge`, for its
    /// team's agents.
    Merge,
    /// Only the caller's own session or agent (an agent reporting its state through a hook).
    Own,
    /// Any agent gets through; the handler admits only the agent itself and records every
    /// refusal (its workspace over git, where a refused push must be on record).
    OwnInHandler,
}

/// The session or agent an agent credential aims at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// The container agent it belongs to (`None`: a host session of no agent).
    pub agent_id: Option<&'a str>,
    /// That agent's team.
    pub team: Option<&'a str>,
    /// Whether that agent leads its team.
    pub leader: bool,
}

/// The answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Outside what the caller may see: answered as if the target did not exist.
    Hidden,
    /// The caller sees the target but may not do this.
    Forbidden,
}

/// Whether `who` may see `target` at all (in lists, and to look at it).
pub fn may_see(who: &AgentIdentity, target: &Target) -> bool {
    let own = target.agent_id == Some(who.agent_id.as_str());
    let team = target.team == Some(who.team.as_str());
    own || (who.leader && team)
}

/// What `who` may do to `target` through a route of kind `access`.
pub fn decide(who: &AgentIdentity, access: AgentAccess, target: &Target) -> Verdict {
    let seen = may_see(who, target);
    let team = target.team == Some(who.team.as_str());
    let own = target.agent_id == Some(who.agent_id.as_str());
    let allowed = match access {
        AgentAccess::Never => return Verdict::Forbidden,
        AgentAccess::Filtered | AgentAccess::OwnInHandler => return Verdict::Allowed,
        AgentAccess::Look => seen,
        AgentAccess::Type | AgentAccess::Control => seen && who.leader,
        AgentAccess::Merge => seen && who.leader && who.may_merge,
        AgentAccess::Own => own,
        AgentAccess::SendToAgent => {
            let to_leader = team && target.leader && !own;
            (who.leader && team) || to_leader
        }
    };
    match (allowed, seen) {
        (true, _) => Verdict::Allowed,
        (false, true) => Verdict::Forbidden,
        // A worker may message its leader without seeing it: that is the one exception.
        (false, false) => Verdict::Hidden,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AgentAccess::*;
    use Verdict::*;

    fn who(id: &str, team: &str, leader: bool) -> AgentIdentity {
        AgentIdentity {
            agent_id: id.into(),
            team: team.into(),
            leader,
            may_merge: false,
        }
    }

    fn at<'a>(id: &'a str, team: &'a str, leader: bool) -> Target<'a> {
        Target {
            agent_id: Some(id),
            team: Some(team),
            leader,
        }
    }

    /// Every cell of the scope table (docs/agents.md): (caller, access, target) -> verdict. Team `a` has
    /// leader `lead` and workers `w1`, `w2`; team `b` has leader `lb` and worker `wb`.
    #[test]
    fn the_team_rules() {
        let lead = who("lead", "a", true);
        let merger = AgentIdentity {
            may_merge: true,
            ..who("lead", "a", true)
        };
        let w1 = who("w1", "a", false);
        let w1_may_merge = AgentIdentity {
            may_merge: true,
            ..who("w1", "a", false)
        };
        let (t_lead, t_w1, t_w2) = (
            at("lead", "a", true),
            at("w1", "a", false),
            at("w2", "a", false),
        );
        let (t_lb, t_wb) = (at("lb", "b", true), at("wb", "b", false));
        let host = Target::default();
        let table: &[(&AgentIdentity, AgentAccess, Target, Verdict)] = &[
            // A worker: its own session, and messages to its leader.
            (&w1, Look, t_w1, Allowed),
            (&w1, Type, t_w1, Forbidden),
            (&w1, Control, t_w1, Forbidden),
            (&w1, SendToAgent, t_w1, Forbidden),
            (&w1, SendToAgent, t_lead, Allowed),
            (&w1, Look, t_lead, Hidden),
            (&w1, Type, t_lead, Hidden),
            (&w1, Look, t_w2, Hidden),
            (&w1, Type, t_w2, Hidden),
            (&w1, SendToAgent, t_w2, Hidden),
            (&w1, Control, t_w2, Hidden),
            (&w1, Look, t_wb, Hidden),
            (&w1, SendToAgent, t_lb, Hidden),
            (&w1, Look, host, Hidden),
            (&w1, Never, t_w1, Forbidden),
            (&w1, Filtered, t_w1, Allowed),
            // A leader: its team.
            (&lead, Look, t_w1, Allowed),
            (&lead, Type, t_w1, Allowed),
            (&lead, Control, t_w2, Allowed),
            (&lead, SendToAgent, t_w2, Allowed),
            (&lead, Look, t_lead, Allowed),
            (&lead, Look, t_wb, Hidden),
            (&lead, Type, t_wb, Hidden),
            (&lead, Control, t_wb, Hidden),
            (&lead, SendToAgent, t_wb, Hidden),
            (&lead, SendToAgent, t_lb, Hidden),
            (&lead, Look, host, Hidden),
            (&lead, Never, t_w1, Forbidden),
            // Its own state, through a hook: its own session only, leader or not.
            (&w1, Own, t_w1, Allowed),
            (&w1, Own, t_lead, Hidden),
            (&w1, Own, t_w2, Hidden),
            (&lead, Own, t_lead, Allowed),
            (&lead, Own, t_w1, Forbidden),
            (&lead, Own, t_wb, Hidden),
            // Landing work: a leader with may_merge, its team only; no worker.
            (&merger, Merge, t_w1, Allowed),
            (&merger, Merge, t_lead, Allowed),
            (&merger, Merge, t_wb, Hidden),
            (&merger, Merge, t_lb, Hidden),
            (&lead, Merge, t_w1, Forbidden),
            (&lead, Merge, t_wb, Hidden),
            (&w1, Merge, t_w1, Forbidden),
            (&w1_may_merge, Merge, t_w1, Forbidden),
            (&w1_may_merge, Merge, t_w2, Hidden),
        ];
        for (caller, access, target, want) in table {
            assert_eq!(
                decide(caller, *access, target),
                *want,
                "{} {access:?} {:?}",
                caller.agent_id,
                target.agent_id
            );
        }
    }
}
