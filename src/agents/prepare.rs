//! What a start does before the container runs: the agent's home mounted into a new container,
//! and the arguments that resume its conversation (see [`super::resume`]); its workspace is
//! made and mounted by [`super::workspace`].

use std::path::{Path, PathBuf};

use super::config_dir::{self, AgentFiles, ConfigDir, ConfigDirSpec};
use super::containers::{ImageInfo, VolumeSpec};
use super::{engine_files, home, resume, Agents};
use crate::agent_state::profile::Install;
use crate::config::AgentDef;
use crate::error::{HubError, HubResult};
use crate::usage::Under;

/// Where the tmux session gets the arguments of this start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ArgsVia {
    /// The image's entrypoint reads them from the agent's `start-args` file.
    File,
    /// The hub starts the session with them.
    Command,
}

impl Agents {
    /// The agent's home on the hub's machine, when it keeps one there (local engines).
    pub(super) fn host_home(&self, def: &AgentDef) -> Option<PathBuf> {
        (def.keep_home && def.docker_host.is_none())
            .then(|| home::home_dir(&self.handles.access.agents_dir, &def.id))
    }

    /// The agent's home in its container, when known: its `home`, else the image's, learnt at
    /// a start or a re-attach.
    pub(super) fn home_in_container_now(&self, def: &AgentDef) -> Option<String> {
        def.home
            .clone()
            .or_else(|| self.lock().get(&def.id).and_then(|rt| rt.home.clone()))
    }

    /// Remembers the agent's home in its container, from its image.
    pub(super) fn learn_home(&self, def: &AgentDef, image: &ImageInfo) {
        let home = home::home_in_container(def, &image.env, &image.user);
        self.update(&def.id, |rt| rt.home = home);
    }

    /// Its CLI's config dir (the one its profile names), in its container and on this machine
    /// ([`config_dir::locate`]: on a remote engine, in the hub's copy of its container);
    /// `None` when the profile names none.
    pub(super) fn config_dir(&self, def: &AgentDef) -> Option<(ConfigDirSpec, ConfigDir)> {
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        let spec = config_dir::spec_of(&profile)?;
        let dir = self.with_files(def, |files| config_dir::locate(&spec, files));
        Some((spec, dir))
    }

    /// `f` of what the hub knows of the agent's files.
    pub(super) fn with_files<T>(&self, def: &AgentDef, f: impl FnOnce(AgentFiles) -> T) -> T {
        let home = self.home_in_container_now(def);
        let kept_home = self.host_home(def);
        let copy = engine_files::through_engine(def).then(|| self.engine_copy(&def.id));
        f(AgentFiles {
            env: &def.env,
            mounts: &def.mounts,
            home: home.as_deref(),
            kept_home: kept_home.as_deref(),
            copy: copy.as_deref(),
        })
    }

    /// Its CLI's config dir on this machine, or why the hub cannot see it (logged for `what`).
    fn config_dir_on_host(&self, def: &AgentDef, what: &str) -> Option<PathBuf> {
        match self.config_dir(def)?.1.on_host {
            Ok(dir) => Some(dir),
            Err(why) => {
                tracing::info!(agent = %def.id, "{what}: {why}");
                None
            }
        }
    }

    /// What the next start of `def` does about its conversation.
    pub(super) fn resume_plan(&self, def: &AgentDef, fresh: bool) -> resume::Plan {
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        let home = self.host_home(def).or_else(|| self.copied_home(def));
        let config = self.config_dir(def);
        let started_before = home::started_mark(&self.handles.access.agents_dir, &def.id).exists();
        resume::plan(
            def,
            profile.resume.as_ref(),
            resume::Past {
                home: home.as_deref(),
                config: config.as_ref().map(|(spec, dir)| (spec, dir)),
                started_before,
                fresh,
            },
        )
    }

    /// Passes the plan's arguments to this start.
    pub(super) fn apply_resume(
        &self,
        def: &mut AgentDef,
        plan: &resume::Plan,
        via: ArgsVia,
    ) -> HubResult<()> {
        let file = home::start_args_file(&self.handles.access.agents_dir, &def.id);
        match via {
            // Put into its container through its engine (`engine_files`).
            ArgsVia::File if engine_files::through_engine(def) => Ok(()),
            ArgsVia::File => home::write_start_args(&file, &plan.args, &plan.when).map_err(|e| {
                HubError::Internal {
                    message: format!("cannot write {}: {e}", file.display()),
                }
            }),
            ArgsVia::Command => {
                if def.command.is_empty() {
                    def.command.push("bash".into());
                }
                if plan.resumes {
                    def.command = resume::with_args(&def.command, &plan.args);
                }
                Ok(())
            }
        }
    }

    /// Writes the CLI's own hooks into its config dir (profiles with `[signals] install`),
    /// after its container is made (Docker fills a new home from the image then) and before it
    /// starts; needs the hub's executable in the container. A failure is logged: the screen
    /// alone reads the agent then.
    pub(super) fn install_hooks(&self, def: &AgentDef) {
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        let Some(install) = profile.signals.install else {
            return;
        };
        if !def.mounts_hub_binary() {
            let why = "no hub executable in the container";
            tracing::info!(agent = %def.id, "{install:?} hooks not written: {why}");
            return;
        }
        let Some(config) = self.config_dir_on_host(def, &format!("{install:?} hooks not written"))
        else {
            return;
        };
        let binary = super::hub_access::BINARY_IN_CONTAINER;
        let hooks = &profile.signals.hooks;
        if let Err(e) = super::hooks::install(install, &config, binary, hooks) {
            tracing::warn!(agent = %def.id, "{install:?} hooks not written: {e}");
        }
    }

    /// A Claude Code agent whose config runs the hub's MCP server (`agent-hub mcp`) is not
    /// ready until that server says it is connected: deliveries wait, and its prompt reads
    /// `working` (`mcp:connecting`) meanwhile, for `ready_timeout` at most. Claude Code draws
    /// its prompt, says `idle` in its status file and takes a prompt before its MCP servers
    /// are connected (2.1.330), and answers that prompt without their tools; it has no signal
    /// of its own for it (see docs/policies.md, "Ready means ready").
    pub(super) fn expect_hub_mcp(&self, def: &AgentDef, session_id: &str) {
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        if profile.signals.install != Some(Install::ClaudeCode) || !def.mounts_hub_binary() {
            return;
        }
        let Some(config) = self.config_dir(def).and_then(|(_, dir)| dir.on_host.ok()) else {
            return;
        };
        let home = self.host_home(def).or_else(|| self.copied_home(def));
        if !super::hooks::claude_runs_hub_mcp(home.as_deref(), &config) {
            return;
        }
        if let Some(session) = self.handles.sessions.session(session_id) {
            session.expect_mcp(def.ready_timeout());
        }
    }

    /// Waits (as long as the session awaits it) for the agent's MCP connection to the hub;
    /// says so when it never came.
    pub(super) async fn wait_for_hub_mcp(&self, def: &AgentDef, session_id: &str) {
        let Some(session) = self.handles.sessions.session(session_id) else {
            return;
        };
        if !session.awaits_mcp() {
            return;
        }
        if !session.mcp_ready().await {
            tracing::warn!(
                agent = %def.id,
                "its MCP connection to the hub (agent-hub mcp) did not come within {} s",
                def.ready_timeout
            );
        }
    }

    /// The directory of its CLI's status files on this machine (its profile's
    /// `[signals.status_file]` in its config dir), when the hub sees it (on a remote engine:
    /// in the hub's copy, which [`Self::mirror`] keeps up while the agent runs).
    pub(super) fn status_dir(&self, def: &AgentDef) -> Option<PathBuf> {
        let profile = (self.handles.profiles)(def.cli_type.as_deref()).profile;
        let spec = profile.signals.status_file.as_ref()?;
        let config = self.config_dir_on_host(def, "its status file is not read")?;
        Some(config.join(&spec.dir))
    }

    /// Where the agent's CLI records what its model calls used, on this machine (`None` when
    /// its profile names no records or the hub cannot see its config dir).
    pub(super) fn usage_following(&self, def: &AgentDef) -> Option<crate::ledger::Following> {
        self.usage_records(def)
            .inspect_err(|why| tracing::info!(agent = %def.id, "its usage is not read: {why}"))
            .ok()
    }

    /// Where the agent's CLI records what its model calls used, or why the hub cannot read
    /// them.
    pub(super) fn usage_records(&self, def: &AgentDef) -> Result<crate::ledger::Following, String> {
        let resolved = (self.handles.profiles)(def.cli_type.as_deref());
        let profile = resolved.profile;
        let Some(spec) = profile.usage.as_ref() else {
            return Err(format!(
                "the {} profile names no usage records (its CLI keeps none the hub reads)",
                profile.name
            ));
        };
        let place = match spec.under() {
            Under::ConfigDir => match self.config_dir(def) {
                Some((_, dir)) => dir.on_host?,
                None => return Err("its CLI's config dir is not on this machine".into()),
            },
            Under::DataDir(data) => {
                let spec = ConfigDirSpec::of_data_dir(data);
                self.with_files(def, |files| config_dir::locate(&spec, files).on_host)?
            }
            Under::Workdir => {
                let workdir = def.workdir_or_default().ok_or(
                    "it names no workdir: the hub cannot tell where its CLI keeps its records",
                )?;
                self.with_files(def, |files| config_dir::on_this_machine(&workdir, files))
                    .map_err(|why| format!("its workdir {workdir} {why}"))?
            }
        };
        Ok(crate::ledger::Following {
            agent: def.id.clone(),
            team: def.team().to_string(),
            dir: place.join(&spec.dir),
            format: spec.records,
            from: Default::default(),
        })
    }

    /// Removes the status files an earlier run of the agent's CLI left in its config dir (its
    /// container is not running, so none is live): the newest file is then the new run's. Only
    /// in its kept home: a config dir mounted from elsewhere is the user's, maybe shared with
    /// CLIs running there.
    pub(super) fn clear_status_files(&self, def: &AgentDef) {
        let (Some(dir), Some(home)) = (self.status_dir(def), self.host_home(def)) else {
            return;
        };
        if !dir.starts_with(&home) {
            return;
        }
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if crate::agent_state::status_file::is_status_file(&name.to_string_lossy()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// The agent started: from now on a profile without files to look for resumes it.
    pub(super) fn mark_started(&self, id: &str) {
        let mark = home::started_mark(&self.handles.access.agents_dir, id);
        if let Err(e) = std::fs::write(&mark, b"") {
            tracing::warn!(agent = id, "cannot write {}: {e}", mark.display());
        }
    }

    /// Mounts the agent's home into the container of `def` and makes it its `HOME`; says
    /// whether it keeps one (its volume is made by [`Self::make_home`], for a new container).
    pub(super) fn add_home(&self, def: &mut AgentDef, image: &ImageInfo) -> bool {
        if !def.keep_home {
            return false;
        }
        let Some(target) = home::home_in_container(def, &image.env, &image.user) else {
            tracing::warn!(
                agent = %def.id,
                "no home kept: the image runs as user '{}' with no HOME; set `home`",
                image.user
            );
            return false;
        };
        let name = home::volume_name(self.hub_id(), &def.id);
        def.mounts.push(format!("{name}:{target}"));
        // The CLI keeps its state under $HOME: make it the kept home (a `home` of its own).
        def.env.entry("HOME".into()).or_insert(target);
        true
    }

    /// Makes the agent's home volume for a new container (and its directory on the hub's
    /// machine, which it is bound to where the engine can see it); one already made is kept.
    pub(super) async fn make_home(&self, def: &AgentDef) -> HubResult<()> {
        let mut device = None;
        if let Some(dir) = self.host_home(def) {
            std::fs::create_dir_all(&dir).map_err(|e| HubError::Internal {
                message: format!("cannot make the agent's home {}: {e}", dir.display()),
            })?;
            device = self
                .handles
                .containers
                .engine_path(def.endpoint(), &dir)
                .await;
            if device.is_none() {
                tracing::warn!(
                    agent = %def.id,
                    "the engine cannot see the data dir (the hub runs in a container without \
                     it on a mount): the agent's home is a Docker volume the hub cannot look \
                     into, and its conversations do not resume"
                );
            }
        }
        let name = home::volume_name(self.hub_id(), &def.id);
        let spec = VolumeSpec {
            name: &name,
            device: device.as_deref(),
            agent_id: &def.id,
            hub_id: self.hub_id(),
        };
        self.handles
            .containers
            .ensure_volume(def.endpoint(), spec)
            .await
    }

    /// The definition a start would make the agent's container with now, its image being
    /// `image`, found without making or changing anything (to tell whether the running
    /// container is outdated); the same steps as a start's. `None` when it cannot be told:
    /// the repository of its workspace cannot be read.
    pub(super) async fn definition_now(
        &self,
        def: &AgentDef,
        image: &ImageInfo,
    ) -> Option<crate::docker::Definition> {
        let mut def = def.clone();
        def.start_tmux = crate::docker::resolve_start_tmux(def.start_tmux, Some(&image.labels));
        if def.clones_workspace() {
            super::cloned_workspace::mount(&mut def, self.hub_id());
        } else if let Some(ws) = self.workspace_info(&def) {
            let common_dir = super::workspace::common_dir_now(&def.id, ws.clone()).await?;
            super::workspace::mount_workspace(&mut def, Path::new(&ws.path), &common_dir);
        }
        self.handles.access.add_env_and_mounts(&mut def);
        self.handles.access.add_pipe_mount(&mut def);
        self.add_home(&mut def, image);
        def.mounts.extend(self.hub_binary_mount(&def));
        Some(crate::docker::container_definition(&def, self.hub_id()))
    }
}
