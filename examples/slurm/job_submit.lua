--[[
cosched's job_submit.lua: jobs submitted with `sbatch --cosched[=OPTS]` (or `srun --cosched`) go to the
co-scheduling partition and are held for `cosched slurm run`, the window controller, which releases each
group of jobs together on one node with its placement. Every other job is left exactly as submitted.

How the option is seen here: sbatch/srun put a SPANK plugin's options in the job's environment as
`_SLURM_SPANK_OPTION_<plugin>_<option>` (the value is "" for a bare `--cosched`); job_submit/lua exposes
that environment as `job_desc.environment` (Slurm 22.05). The plugin registers the option with
spank_option_register, which is what makes it known to sbatch (allocator context).

The mark `cosched` in the admin comment (users cannot set it) is what the controller manages: it never
touches a job without it. Install: copy beside slurm.conf and set `JobSubmitPlugins=lua`.
--]]

-- Site settings: the co-scheduling partition (OverSubscribe=FORCE:Cmax) and the plugin names that may
-- carry the option (the name given to SPANK_PLUGIN in the plugin).
local COSCHED_PARTITION = "cosched"
local PLUGIN_NAMES = { "cosched", "cosched_spank" }

local function cosched_option(job_desc)
   local env = job_desc.environment
   if env == nil then
      return nil
   end
   for _, plugin in ipairs(PLUGIN_NAMES) do
      local value = env["_SLURM_SPANK_OPTION_" .. plugin .. "_cosched"]
      if value ~= nil then
         return value
      end
   end
   return nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   local opts = cosched_option(job_desc)
   if opts == nil then
      return slurm.SUCCESS
   end
   if job_desc.partition ~= nil and job_desc.partition ~= COSCHED_PARTITION then
      slurm.log_user("cosched: job moved from partition %s to %s (co-scheduled jobs run there)",
                     job_desc.partition, COSCHED_PARTITION)
   end
   job_desc.partition = COSCHED_PARTITION
   -- Held (priority 0) until the controller has placed it; the controller's 'scontrol release' starts it.
   job_desc.priority = 0
   -- Requeue allowed, whatever JobRequeue says for other jobs: a job that slurmctld, restarted from older state,
   -- believes started but that never reached its node is requeued and runs; one that did start is refused by
   -- cosched's SPANK plugin (its start is recorded once), so a requeue never runs it twice (docs/slurm.md).
   job_desc.requeue = 1
   job_desc.admin_comment = "cosched:" .. opts
   slurm.log_info("cosched: job from uid %u held for the co-scheduling controller (options '%s')",
                  submit_uid, opts)
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end

slurm.log_info("cosched job_submit.lua loaded (partition %s)", COSCHED_PARTITION)
return slurm.SUCCESS
