//! A consumer group's subscribed topics and target assignment: the
//! subscription's regular expressions, the topics each member subscribes,
//! the subscription metadata whose change bumps the group epoch, and the
//! assignor's run that computes each member's target.

use super::*;

impl ConsumerGroup {
    pub(super) fn check_regex(&mut self, r: &str, cfg: &ConsumerConfig) -> Result<(), Failure> {
        if r.len() > cfg.max_regex_bytes {
            return Err((
                crate::codes::INVALID_REGULAR_EXPRESSION,
                format!(
                    "SubscribedTopicRegex is longer than {} bytes.",
                    cfg.max_regex_bytes
                ),
            ));
        }
        if self.regexes.contains_key(r) {
            return Ok(());
        }
        let in_use: BTreeSet<&str> = self
            .model
            .members
            .values()
            .filter_map(|m| m.sub.topic_regex.as_deref())
            .collect();
        if in_use.len() >= cfg.max_regexes && !in_use.contains(r) {
            return Err((
                crate::codes::INVALID_REGULAR_EXPRESSION,
                format!(
                    "The group already uses {} distinct regular expressions.",
                    cfg.max_regexes
                ),
            ));
        }
        compile(r).map(|_| ()).map_err(|e| {
            (
                crate::codes::INVALID_REGULAR_EXPRESSION,
                format!("SubscribedTopicRegex `{r}` is not a valid regular expression: {e}."),
            )
        })
    }

    /// Every topic a member subscribes to, by name or regular expression.
    pub(super) fn member_topics(&self, m: &Member) -> BTreeSet<String> {
        let mut out = m.sub.topic_names.clone();
        if let Some(r) = &m.sub.topic_regex
            && let Some(res) = self.regexes.get(r)
        {
            out.extend(res.topics.iter().cloned());
        }
        out
    }

    /// Resolves regular expressions (again when topics changed; `defer`,
    /// one just introduced, on the next call), then maps every subscribed
    /// name that exists to its id and partition count.
    pub(super) fn subscription_metadata(
        &mut self,
        topics: &dyn Topics,
        defer: Option<&str>,
    ) -> BTreeMap<String, (TopicId, i32)> {
        let version = topics.version();
        let wanted: BTreeSet<String> = self
            .model
            .members
            .values()
            .filter_map(|m| m.sub.topic_regex.clone())
            .collect();
        self.regexes
            .retain(|r, _| wanted.contains(r) && defer != Some(r.as_str()));
        let stale: Vec<&String> = wanted
            .iter()
            .filter(|r| self.regexes.get(*r).is_none_or(|x| x.version != version))
            .collect();
        if !stale.is_empty() {
            let names = topics.names();
            for r in stale {
                if defer == Some(r.as_str()) {
                    self.regexes.insert(
                        r.clone(),
                        Resolved {
                            version: UNRESOLVED,
                            topics: BTreeSet::new(),
                        },
                    );
                    continue;
                }
                let matched = match compile(r) {
                    Ok(re) => names
                        .iter()
                        .filter(|n| re.is_match(n) && !n.starts_with("__"))
                        .cloned()
                        .collect(),
                    Err(_) => BTreeSet::new(),
                };
                self.regexes.insert(
                    r.clone(),
                    Resolved {
                        version,
                        topics: matched,
                    },
                );
            }
        }
        let mut out = BTreeMap::new();
        for m in self.model.members.values() {
            for name in self.member_topics(m) {
                if out.contains_key(&name) {
                    continue;
                }
                if let Some(meta) = topics.lookup(&name) {
                    out.insert(name, meta);
                }
            }
        }
        out
    }

    pub(super) fn compute_targets(
        &mut self,
        cfg: &ConsumerConfig,
        changes: &mut Vec<ConsumerRecord>,
    ) {
        let name = self.assignor(cfg).to_string();
        let topics_of: Vec<BTreeSet<TopicId>> = self
            .model
            .members
            .values()
            .map(|m| {
                self.member_topics(m)
                    .iter()
                    .filter_map(|n| self.model.subscribed.get(n).map(|(id, _)| *id))
                    .collect()
            })
            .collect();
        let partitions: BTreeMap<TopicId, i32> = self.model.subscribed.values().copied().collect();
        let input: Vec<AssignorMember<'_>> = self
            .model
            .members
            .values()
            .zip(topics_of)
            .map(|(m, topics)| AssignorMember {
                id: &m.id,
                instance_id: m.sub.instance_id.as_deref(),
                topics,
                previous: self.model.targets.get(&m.id),
            })
            .collect();
        let started = Instant::now();
        let out = assignor::assign(&name, &input, &partitions);
        tracing::info!(group = %self.id, epoch = self.model.epoch, assignor = %name,
            elapsed_us = started.elapsed().as_micros() as u64, "computed a new target assignment");
        for (member, assignment) in out {
            if self.model.targets.get(&member) != Some(&assignment) {
                changes.push(ConsumerRecord::Target {
                    member: member.clone(),
                    assignment: assignment.clone(),
                });
                self.model.targets.insert(member, assignment);
            }
        }
    }
}

/// Compiles a subscription's regular expression, bounded in size (the
/// `regex` crate's syntax, close to the RE2/J syntax Kafka uses; always
/// matched against the whole topic name, as Kafka does).
fn compile(r: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{r})$"))
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
}
