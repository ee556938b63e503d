package coordinator.tests;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** Runs a Kafka tool's main class in this JVM, its stdout and stderr captured, Exit.exit trapped. */
final class ToolRunner {
    private ToolRunner() {}

    static synchronized ObjectNode run(JsonNode request) throws Exception {
        String mainClass = request.path("main").asText();
        List<String> args = new ArrayList<>();
        request.path("args").forEach(arg -> args.add(arg.asText()));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        int status = 0;
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args.toArray(new String[0]));
        } catch (InvocationTargetException thrown) {
            Throwable cause = thrown.getCause();
            if (cause instanceof Driver.ExitCalled exit) {
                status = exit.status;
            } else {
                status = -1;
                cause.printStackTrace(System.err);
            }
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(savedOut);
            System.setErr(savedErr);
        }
        ObjectNode answer = Driver.JSON.createObjectNode();
        answer.put("status", status);
        answer.put("stdout", out.toString(StandardCharsets.UTF_8));
        answer.put("stderr", err.toString(StandardCharsets.UTF_8));
        return answer;
    }
}
