package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Admin client against one bootstrap: each action answers JSON, errors as the simple class
 * name of the exception (per group or per partition where Admin reports them so).
 */
final class AdminActions {
    private AdminActions() {}

    static ObjectNode run(JsonNode request) throws Exception {
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", request.path("bootstrap").asText(),
                "request.timeout.ms", "20000", "default.api.timeout.ms", "30000"))) {
            ObjectNode answer = Driver.JSON.createObjectNode();
            try {
                answer.set("result", act(admin, request));
            } catch (Exception failure) {
                answer.put("exception", Driver.errorName(failure));
            }
            return answer;
        }
    }

    private static JsonNode act(Admin admin, JsonNode request) throws Exception {
        String action = request.path("action").asText();
        String group = request.path("group").asText();
        switch (action) {
            case "list_groups":
                return listGroups(admin);
            case "describe_groups":
                return describeGroups(admin, strings(request.path("groups")));
            case "delete_groups":
                return perKey(admin.deleteConsumerGroups(strings(request.path("groups"))).deletedGroups());
            case "list_offsets":
                return listOffsets(admin, group);
            case "alter_offsets": {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                request.path("offsets").fields().forEachRemaining(
                        e -> offsets.put(partition(e.getKey()), new OffsetAndMetadata(e.getValue().asLong())));
                var result = admin.alterConsumerGroupOffsets(group, offsets);
                ObjectNode out = Driver.JSON.createObjectNode();
                List<TopicPartition> sorted = new ArrayList<>(offsets.keySet());
                sorted.sort(Comparator.comparing(TopicPartition::toString));
                for (TopicPartition tp : sorted) {
                    out.put(tp.toString(), outcome(result.partitionResult(tp)));
                }
                return out;
            }
            case "delete_offsets": {
                Set<TopicPartition> partitions = new HashSet<>();
                for (String name : strings(request.path("partitions"))) {
                    partitions.add(partition(name));
                }
                var result = admin.deleteConsumerGroupOffsets(group, partitions);
                ObjectNode out = Driver.JSON.createObjectNode();
                out.put("all", outcome(result.all()));
                for (TopicPartition tp : partitions) {
                    out.put(tp.toString(), outcome(result.partitionResult(tp)));
                }
                return out;
            }
            case "describe_configs":
                return describeConfigs(admin, group);
            case "alter_configs": {
                List<AlterConfigOp> ops = new ArrayList<>();
                request.path("set").fields().forEachRemaining(e -> ops.add(
                        new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SET)));
                for (String name : strings(request.path("delete"))) {
                    ops.add(new AlterConfigOp(new ConfigEntry(name, null), AlterConfigOp.OpType.DELETE));
                }
                ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
                ObjectNode out = Driver.JSON.createObjectNode();
                out.put("outcome", outcome(admin.incrementalAlterConfigs(Map.of(resource, ops)).all()));
                return out;
            }
            default:
                throw new IllegalArgumentException("unknown admin action " + action);
        }
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(item -> out.add(item.asText()));
        return out;
    }

    static TopicPartition partition(String name) {
        int dash = name.lastIndexOf('-');
        return new TopicPartition(name.substring(0, dash), Integer.parseInt(name.substring(dash + 1)));
    }

    private static String outcome(KafkaFuture<?> future) {
        try {
            future.get();
            return "ok";
        } catch (Exception failure) {
            return Driver.errorName(failure);
        }
    }

    private static ObjectNode perKey(Map<String, KafkaFuture<Void>> futures) {
        ObjectNode out = Driver.JSON.createObjectNode();
        new TreeMap<>(futures).forEach((key, future) -> out.put(key, outcome(future)));
        return out;
    }

    private static ArrayNode listGroups(Admin admin) throws Exception {
        List<GroupListing> listings = new ArrayList<>(admin.listGroups(new ListGroupsOptions()).all().get());
        listings.sort(Comparator.comparing(GroupListing::groupId));
        ArrayNode out = Driver.JSON.createArrayNode();
        for (GroupListing listing : listings) {
            ObjectNode item = out.addObject();
            item.put("group", listing.groupId());
            item.put("type", listing.type().map(Object::toString).orElse(""));
            item.put("protocol", listing.protocol());
            item.put("state", listing.groupState().map(Object::toString).orElse(""));
        }
        return out;
    }

    private static ObjectNode describeGroups(Admin admin, Collection<String> groups) {
        ObjectNode out = Driver.JSON.createObjectNode();
        var futures = admin.describeConsumerGroups(groups).describedGroups();
        for (String group : new TreeSet<>(groups)) {
            ObjectNode item = out.putObject(group);
            ConsumerGroupDescription description;
            try {
                description = futures.get(group).get();
            } catch (Exception failure) {
                item.put("exception", Driver.errorName(failure));
                continue;
            }
            item.put("simple", description.isSimpleConsumerGroup());
            item.put("type", String.valueOf(description.type()));
            item.put("state", String.valueOf(description.groupState()));
            item.put("assignor", description.partitionAssignor());
            item.put("group_epoch", description.groupEpoch().map(String::valueOf).orElse(""));
            item.put("target_assignment_epoch", description.targetAssignmentEpoch().map(String::valueOf).orElse(""));
            ArrayNode members = item.putArray("members");
            List<MemberDescription> sorted = new ArrayList<>(description.members());
            sorted.sort(Comparator.comparing(MemberDescription::clientId)
                    .thenComparing(m -> m.groupInstanceId().orElse("")));
            for (MemberDescription member : sorted) {
                ObjectNode m = members.addObject();
                m.put("member_id", member.consumerId());
                m.put("instance_id", member.groupInstanceId().orElse(""));
                m.put("client_id", member.clientId());
                m.put("host", member.host());
                ArrayNode assigned = m.putArray("assignment");
                new TreeSet<>(member.assignment().topicPartitions().stream().map(Object::toString).toList())
                        .forEach(assigned::add);
                m.put("member_epoch", member.memberEpoch().map(String::valueOf).orElse(""));
                m.put("upgraded", member.upgraded().map(String::valueOf).orElse(""));
                if (member.targetAssignment().isPresent()) {
                    ArrayNode target = m.putArray("target_assignment");
                    new TreeSet<>(member.targetAssignment().get().topicPartitions().stream()
                            .map(Object::toString).toList()).forEach(target::add);
                }
            }
        }
        return out;
    }

    private static ObjectNode listOffsets(Admin admin, String group) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        ObjectNode out = Driver.JSON.createObjectNode();
        Map<String, OffsetAndMetadata> sorted = new TreeMap<>();
        offsets.forEach((tp, offset) -> sorted.put(tp.toString(), offset));
        sorted.forEach((tp, offset) -> {
            ObjectNode item = out.putObject(tp);
            if (offset == null) {
                item.putNull("offset");
            } else {
                item.put("offset", offset.offset());
                item.put("metadata", offset.metadata());
                item.put("leader_epoch", offset.leaderEpoch().map(String::valueOf).orElse(""));
            }
        });
        return out;
    }

    private static ArrayNode describeConfigs(Admin admin, String group) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        List<ConfigEntry> entries = new ArrayList<>(config.entries());
        entries.sort(Comparator.comparing(ConfigEntry::name));
        ArrayNode out = Driver.JSON.createArrayNode();
        for (ConfigEntry entry : entries) {
            ObjectNode item = out.addObject();
            item.put("name", entry.name());
            item.put("value", entry.value());
            item.put("source", String.valueOf(entry.source()));
            item.put("read_only", entry.isReadOnly());
            item.put("sensitive", entry.isSensitive());
            item.put("type", String.valueOf(entry.type()));
        }
        return out;
    }
}
