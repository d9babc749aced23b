// A Java probe of a running broker through Kafka's Admin client, compiled
// and run against either client classpath (scripts/setup-java --classpath
// 4|3): prints "client=<version> nodes=<n> transaction.version=<level>".
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FinalizedVersionRange;

public class RefProbe {
    // AppInfoParser moved to utils.internals in 4.x.
    static String clientVersion() throws Exception {
        for (String c : new String[] {"org.apache.kafka.common.utils.AppInfoParser",
                "org.apache.kafka.common.utils.internals.AppInfoParser"}) {
            try {
                return (String) Class.forName(c).getMethod("getVersion").invoke(null);
            } catch (ClassNotFoundException e) {
                // the other package
            }
        }
        throw new IllegalStateException("no AppInfoParser");
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        try (Admin admin = Admin.create(p)) {
            int nodes = admin.describeCluster().nodes().get().size();
            Map<String, FinalizedVersionRange> f =
                admin.describeFeatures().featureMetadata().get().finalizedFeatures();
            FinalizedVersionRange tv = f.get("transaction.version");
            System.out.println("client=" + clientVersion() + " nodes=" + nodes
                + " transaction.version=" + (tv == null ? "none" : tv.maxVersionLevel()));
        }
    }
}
